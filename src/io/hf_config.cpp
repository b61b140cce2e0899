#include "io/hf_config.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "core/error.h"
#include "core/text_file.h"
#include "io/gguf_model.h"
#include "io/json_fields.h"

namespace deepinfer::io {
namespace {

using json = nlohmann::json;

constexpr const char* kRopeKeys[] = {
    "rope_type",        "type",
    "rope_theta",       "partial_rotary_factor",
    "factor",           "original_max_position_embeddings",
    "attention_factor", "beta_fast",
    "beta_slow",        "mscale",
    "mscale_all_dim",   "truncate",
    "low_freq_factor",  "high_freq_factor",
};
constexpr const char* kRopeTypes[] = {"default", "linear", "dynamic", "yarn", "llama3"};

// The RoPE settings live in `rope_scaling` (transformers 4.x, with rope_theta and
// partial_rotary_factor at the top level) or in `rope_parameters` (5.x, everything inside;
// for models with several attention kinds nested as {"full_attention": {...}, ...}).
// Precedence follows transformers 5 (RotaryEmbeddingConfigMixin.standardize_rope_params):
// values inside the dict win over top-level ones, except a top-level
// original_max_position_embeddings, which wins for yarn and llama3.
void parse_rope(const JsonFields& top, const std::string& source, ModelConfig& c) {
  const json* scaling = top.find("rope_scaling");
  const json* params = top.find("rope_parameters");
  if (scaling && params && *scaling != *params) {
    top.fail_key("rope_parameters",
                 "both rope_scaling (transformers 4.x) and rope_parameters (5.x) are given and "
                 "differ; keep one of them");
  }
  std::string prefix = params ? "rope_parameters" : "rope_scaling";
  const json empty = json::object();
  const json* dict = params ? params : scaling ? scaling : &empty;
  if (!dict->is_object()) top.fail_key(prefix, "expected an object, got ", dict->type_name());

  bool nested = false;
  for (const auto& item : dict->items()) nested = nested || item.value().is_object();
  if (nested) {
    const auto full = dict->find("full_attention");
    if (full == dict->end() || !full->is_object()) {
      top.fail_key(prefix, "nested per layer type but has no \"full_attention\" object");
    }
    dict = &*full;
    prefix += ".full_attention";
  }
  const JsonFields r(*dict, source, prefix + ".");
  for (const auto& item : dict->items()) {
    bool known = false;
    for (const char* key : kRopeKeys) known = known || item.key() == key;
    if (!known) r.fail_key(item.key(), "unknown RoPE setting (not supported)");
  }

  RopeScaling& s = c.rope_scaling;
  const auto rope_type = r.string("rope_type");
  const auto legacy_type = r.string("type");
  if (rope_type && legacy_type && *rope_type != *legacy_type) {
    r.fail_key("type", "\"", *legacy_type, "\" contradicts rope_type \"", *rope_type, "\"");
  }
  s.type = rope_type ? *rope_type : legacy_type ? *legacy_type : "default";
  bool supported = false;
  for (const char* t : kRopeTypes) supported = supported || s.type == t;
  if (!supported) {
    r.fail_key(rope_type ? "rope_type" : "type", "unsupported RoPE type \"", s.type,
               "\" (supported: default, linear, dynamic, yarn, llama3)");
  }

  c.rope_theta = r.positive_number("rope_theta")
                     .value_or(top.positive_number("rope_theta").value_or(c.rope_theta));
  c.partial_rotary_factor =
      r.positive_number("partial_rotary_factor")
          .value_or(top.positive_number("partial_rotary_factor").value_or(1.0));
  if (c.partial_rotary_factor > 1.0) {
    const bool inside = r.has("partial_rotary_factor");
    (inside ? r : top)
        .fail_key("partial_rotary_factor", "must be in (0, 1], got ", c.partial_rotary_factor);
  }

  const auto factor = r.positive_number("factor");
  if (!factor && s.type != "default") r.fail_key("factor", "missing (required by ", s.type, ")");
  s.factor = factor.value_or(1.0);

  const bool needs_original = s.type == "yarn" || s.type == "llama3";
  std::optional<int64_t> original = r.positive("original_max_position_embeddings");
  if (needs_original) {
    if (auto top_level = top.positive("original_max_position_embeddings")) original = top_level;
    if (!original && c.max_position_embeddings > 0) original = c.max_position_embeddings;
    if (!original) {
      r.fail_key("original_max_position_embeddings", "missing (required by ", s.type,
                 " when max_position_embeddings is not given)");
    }
  }
  s.original_max_position_embeddings = original.value_or(0);

  s.beta_fast = r.number("beta_fast").value_or(s.beta_fast);
  s.beta_slow = r.number("beta_slow").value_or(s.beta_slow);
  s.mscale = r.number("mscale").value_or(s.mscale);
  s.mscale_all_dim = r.number("mscale_all_dim").value_or(s.mscale_all_dim);
  s.attention_factor = r.number("attention_factor");
  s.truncate = r.boolean("truncate").value_or(s.truncate);
  if (s.type == "llama3") {
    for (const char* key : {"low_freq_factor", "high_freq_factor"}) {
      if (!r.has(key)) r.fail_key(key, "missing (required by llama3)");
    }
  }
  s.low_freq_factor = r.positive_number("low_freq_factor").value_or(s.low_freq_factor);
  s.high_freq_factor = r.positive_number("high_freq_factor").value_or(s.high_freq_factor);
}

std::string parse_architecture(const JsonFields& top) {
  const json* list = top.find("architectures");
  if (list == nullptr) return "";
  if (!list->is_array() || list->empty() || !(*list)[0].is_string()) {
    top.fail_key("architectures", "expected a non-empty list of class names, got ", list->dump());
  }
  return (*list)[0].get<std::string>();
}

// What a model without generation_config.json generates with: config.json's token ids.
GenerationConfig model_defaults(const ModelConfig& model) {
  GenerationConfig g;
  g.eos_token_ids = model.eos_token_ids;
  g.bos_token_id = model.bos_token_id;
  return g;
}

// Multimodal wrappers whose text model is served on its own: their text_config is the model's
// config, under the wrapper's architecture name (Kimi-K2.5: a DeepSeek-V3 text model).
// (Moonshot's config.json spells the class KimiK25..., transformers Kimi_K25...)
constexpr const char* kTextModelWrappers[] = {"KimiK25ForConditionalGeneration",
                                              "Kimi_K25ForConditionalGeneration"};

// The text model's config of a wrapper (its text_config with the wrapper's architectures);
// otherwise the root itself.
json text_model_config(const json& root, const std::string& source) {
  const JsonFields top(root, source);
  const std::string architecture = parse_architecture(top);
  const bool wrapper = std::any_of(std::begin(kTextModelWrappers), std::end(kTextModelWrappers),
                                   [&](const char* name) { return architecture == name; });
  if (!wrapper) return root;
  const json* text = top.find("text_config");
  if (text == nullptr || !text->is_object())
    top.fail_key("text_config", "missing or not an object (", architecture,
                 " keeps its text model's settings there)");
  // The wrapper's own keys (quantization_config, the test-model mark) apply to the whole
  // checkpoint; the text model's settings win where both have one.
  json out = *text;
  for (const auto& [key, value] : root.items())
    if (key != "text_config" && key != "vision_config" && !out.contains(key)) out[key] = value;
  out["architectures"] = root["architectures"];
  return out;
}

}  // namespace

ModelConfig ModelConfig::parse(const json& file, const std::string& source) {
  if (!file.is_object()) fail(source, ": expected a JSON object, got ", file.type_name());
  const json root = text_model_config(file, source);
  const JsonFields top(root, source);
  ModelConfig c;
  c.raw = root;
  c.architecture = parse_architecture(top);
  c.model_type = top.string("model_type").value_or("");
  if (c.architecture.empty() && c.model_type.empty()) {
    top.fail_key("architectures", "missing, and so is model_type; cannot tell the model family");
  }

  c.vocab_size = top.required_positive("vocab_size");
  c.hidden_size = top.required_positive("hidden_size");
  c.num_hidden_layers = top.required_positive("num_hidden_layers");
  c.num_attention_heads = top.required_positive("num_attention_heads");
  c.intermediate_size = top.positive("intermediate_size").value_or(0);
  c.num_key_value_heads = top.positive("num_key_value_heads").value_or(c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    top.fail_key("num_key_value_heads", c.num_key_value_heads,
                 " does not divide num_attention_heads ", c.num_attention_heads);
  }
  if (auto head_dim = top.positive("head_dim")) {
    c.head_dim = *head_dim;
  } else if (c.hidden_size % c.num_attention_heads != 0) {
    top.fail_key("head_dim", "not given, and hidden_size ", c.hidden_size,
                 " is not divisible by num_attention_heads ", c.num_attention_heads);
  } else {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.max_position_embeddings = top.positive("max_position_embeddings").value_or(0);
  c.rms_norm_eps = top.positive_number("rms_norm_eps").value_or(c.rms_norm_eps);
  parse_rope(top, source, c);
  c.tie_word_embeddings = top.boolean("tie_word_embeddings").value_or(false);
  c.attention_bias = top.boolean("attention_bias");
  c.mlp_bias = top.boolean("mlp_bias");
  c.hidden_act = top.string("hidden_act").value_or(c.hidden_act);
  // transformers 5 writes "dtype", 4.x "torch_dtype"; the newer key wins if both are present.
  c.torch_dtype = top.string("dtype").value_or(top.string("torch_dtype").value_or(""));
  c.bos_token_id = top.token_id("bos_token_id");
  c.eos_token_ids = top.token_ids("eos_token_id");
  return c;
}

ModelConfig ModelConfig::load(const std::string& dir) {
  if (const auto gguf = gguf_model_file(dir)) {
    return parse(gguf_config_json(GgufFile::open(*gguf)), *gguf);
  }
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  return parse(read_json_file(path), path);
}

GenerationConfig GenerationConfig::load(const std::string& dir, const ModelConfig& model) {
  if (const auto gguf = gguf_model_file(dir)) {
    return parse(gguf_generation_config_json(GgufFile::open(*gguf)), *gguf, model);
  }
  const std::filesystem::path path = std::filesystem::path(dir) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return model_defaults(model);
  return parse(read_json_file(path.string()), path.string(), model);
}

GenerationConfig GenerationConfig::parse(const json& root, const std::string& source,
                                         const ModelConfig& model) {
  GenerationConfig g = model_defaults(model);
  if (!root.is_object()) fail(source, ": expected a JSON object, got ", root.type_name());
  const JsonFields r(root, source);
  if (r.has("eos_token_id")) g.eos_token_ids = r.token_ids("eos_token_id");
  if (r.has("bos_token_id")) g.bos_token_id = r.token_id("bos_token_id");
  g.pad_token_id = r.token_id("pad_token_id");
  g.do_sample = r.boolean("do_sample").value_or(false);
  g.temperature = r.number("temperature");
  if (g.temperature && *g.temperature < 0) r.fail_key("temperature", "must be >= 0");
  g.top_p = r.number("top_p");
  if (g.top_p && !(*g.top_p > 0 && *g.top_p <= 1)) r.fail_key("top_p", "must be in (0, 1]");
  g.top_k = r.integer("top_k");
  if (g.top_k && *g.top_k < 0) r.fail_key("top_k", "must be >= 0 (0 disables it)");
  g.repetition_penalty = r.positive_number("repetition_penalty");
  g.max_new_tokens = r.positive("max_new_tokens");
  g.raw = root;
  return g;
}

}  // namespace deepinfer::io
