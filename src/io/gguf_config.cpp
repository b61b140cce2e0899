// config.json from a GGUF file's `<arch>.*` metadata, with the keys and spellings
// transformers' own configs use, so the family builders read a GGUF model exactly as they
// read a checkpoint directory. The mapping follows llama.cpp's LLM_KV names (llama-arch.cpp)
// and its converter (convert_hf_to_gguf.py), which wrote them from those configs.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/tensor.h"
#include "io/gguf_model.h"

namespace deepinfer::io {
namespace {

using nlohmann::json;

struct HfFamily {
  const char* gguf_arch;
  const char* architecture;
  const char* model_type;
};

constexpr HfFamily kFamilies[] = {
    {"llama", "LlamaForCausalLM", "llama"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
    {"deepseek2", "DeepseekV2ForCausalLM", "deepseek_v2"},
};

// The shortest decimal that reads back as the f32 nearest `value`: GGUF keeps floats as f32,
// and the converter wrote them from config values such as 1e-05, which this recovers exactly
// (rather than 9.999999747378752e-06). Values that are exact f64 numbers stay as they are.
double shortest_f32(double value) {
  const float narrow = static_cast<float>(value);
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), narrow).ptr;
  double out = value;
  std::from_chars(buf, end, out);
  return out;
}

double f32_value(double stored) {
  return static_cast<double>(static_cast<float>(stored)) == stored ? shortest_f32(stored) : stored;
}

class Metadata {
 public:
  Metadata(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(const char* name) const { return arch_ + "." + name; }
  std::optional<int64_t> integer(const char* name) const {
    const auto it = file_.metadata().find(key(name));
    if (it != file_.metadata().end() &&
        std::holds_alternative<std::shared_ptr<const GgufArray>>(it->second)) {
      fail(file_.path(), ": metadata ", key(name),
           " is a per-layer list; models whose layers differ in that value are not supported");
    }
    return file_.get_int(key(name));
  }
  int64_t required(const char* name) const {
    const auto value = integer(name);
    if (!value) fail(file_.path(), ": metadata ", key(name), " is missing");
    if (*value <= 0) fail(file_.path(), ": metadata ", key(name), " must be > 0, got ", *value);
    return *value;
  }
  std::optional<double> number(const char* name) const {
    const auto value = file_.get_float(key(name));
    return value ? std::optional<double>(f32_value(*value)) : std::nullopt;
  }
  std::optional<bool> boolean(const char* name) const { return file_.get_bool(key(name)); }

 private:
  const GgufFile& file_;
  std::string arch_;
};

const HfFamily& family_of(const GgufFile& file, const std::string& arch) {
  for (const HfFamily& family : kFamilies) {
    if (arch == family.gguf_arch) return family;
  }
  std::string known;
  for (const HfFamily& family : kFamilies)
    known += std::string(known.empty() ? "" : ", ") + family.gguf_arch;
  fail(file.path(), ": general.architecture '", arch,
       "' is not supported from GGUF (supported: ", known, ")");
}

// Llama 3.1's rope scaling: the converter stores only the per-frequency factors it computed
// from (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings). The
// parameters are recovered by recomputing the factors for the published values (factor =
// the largest factor; low 1, high 4 and the original context a power of two in every Llama 3.x
// release) and keeping the set that reproduces the file's factors.
json llama3_from_factors(const GgufFile& file, const Tensor& stored, double base, int64_t dim) {
  const Tensor f32 = stored.to(DType::f32);
  const auto factors = f32.span<const float>();
  DI_CHECK(static_cast<int64_t>(factors.size()) * 2 == dim, file.path(), ": rope_freqs.weight has ",
           factors.size(), " factors for rotary dimension ", dim);
  const double factor = *std::max_element(factors.begin(), factors.end());
  const auto reproduces = [&](double low, double high, double original) {
    for (int64_t i = 0; i < dim / 2; ++i) {
      const float freq = 1.0f / std::pow(static_cast<float>(base),
                                         static_cast<float>(2 * i) / static_cast<float>(dim));
      const double wavelen = 2 * M_PI / freq;
      double want = factor;
      if (wavelen < original / high) {
        want = 1.0;
      } else if (wavelen <= original / low) {
        const double smooth = (original / wavelen - low) / (high - low);
        want = 1.0 / ((1 - smooth) / factor + smooth);
      }
      if (std::fabs(want - factors[static_cast<size_t>(i)]) > 1e-6 * want) return false;
    }
    return true;
  };
  for (const double low : {1.0, 2.0}) {
    for (const double high : {4.0, 2.0, 8.0}) {
      for (int64_t original = 16; original <= (int64_t{1} << 24); original *= 2) {
        if (reproduces(low, high, static_cast<double>(original))) {
          return {{"rope_type", "llama3"},
                  {"factor", factor},
                  {"low_freq_factor", low},
                  {"high_freq_factor", high},
                  {"original_max_position_embeddings", original}};
        }
      }
    }
  }
  fail(file.path(),
       ": rope_freqs.weight holds per-frequency rope factors that no Llama 3 "
       "rope scaling (factor ",
       factor,
       ", low/high frequency factors, original "
       "context) reproduces; this file's rope scaling is not supported");
}

void set_rope(const GgufFile& file, const Metadata& m, json& c) {
  c["rope_theta"] = m.number("rope.freq_base").value_or(10000.0);
  if (const GgufTensorInfo* freqs = file.find_tensor("rope_freqs.weight")) {
    const auto head_dim = c.contains("head_dim") ? c["head_dim"].get<int64_t>()
                                                 : c["hidden_size"].get<int64_t>() /
                                                       c["num_attention_heads"].get<int64_t>();
    const int64_t dim = m.integer("rope.dimension_count").value_or(head_dim);
    c["rope_scaling"] = llama3_from_factors(file, file.to_tensor(*freqs), c["rope_theta"], dim);
    return;
  }
  const auto type = file.get_string(m.key("rope.scaling.type"));
  if (!type || *type == "none") return;
  json s;
  const double factor = m.number("rope.scaling.factor").value_or(1.0);
  s["factor"] = factor;
  if (*type == "linear") {
    s["rope_type"] = "linear";
  } else if (*type == "yarn") {
    s["rope_type"] = "yarn";
    if (auto original = m.integer("rope.scaling.original_context_length")) {
      s["original_max_position_embeddings"] = *original;
    }
    if (auto v = m.number("rope.scaling.yarn_beta_fast")) s["beta_fast"] = *v;
    if (auto v = m.number("rope.scaling.yarn_beta_slow")) s["beta_slow"] = *v;
    // The converter keeps DeepSeek's mscale_all_dim as yarn_log_multiplier = 0.1 *
    // mscale_all_dim, and llama.cpp's graph takes the rotary mscale to equal it (the cos/sin
    // factor mscale / mscale_all_dim is 1), as in every published DeepSeek config.
    if (auto v = m.number("rope.scaling.yarn_log_multiplier")) {
      const double mscale_all_dim = shortest_f32(*v / 0.1);
      s["mscale"] = mscale_all_dim;
      s["mscale_all_dim"] = mscale_all_dim;
    }
  } else {
    fail(file.path(), ": metadata ", m.key("rope.scaling.type"), " '", *type,
         "' is not supported (none, linear, yarn)");
  }
  c["rope_scaling"] = s;
}

void set_moe(const GgufFile& file, const Metadata& m, const std::string& arch, json& c) {
  const auto experts = m.integer("expert_count");
  if (!experts || *experts == 0) return;
  c["num_experts_per_tok"] = m.required("expert_used_count");
  c["moe_intermediate_size"] = m.required("expert_feed_forward_length");
  if (arch == "qwen3moe") {
    c["num_experts"] = *experts;
    c["norm_topk_prob"] = true;  // llama.cpp's qwen3moe graph always renormalizes
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = json::array();
    return;
  }
  // deepseek2
  c["n_routed_experts"] = *experts;
  c["n_shared_experts"] = m.integer("expert_shared_count").value_or(0);
  c["first_k_dense_replace"] = m.integer("leading_dense_block_count").value_or(0);
  c["moe_layer_freq"] = 1;
  c["routed_scaling_factor"] = m.number("expert_weights_scale").value_or(1.0);
  c["norm_topk_prob"] = m.boolean("expert_weights_norm").value_or(false);
  // 1 softmax, 2 sigmoid. Absent: llama.cpp assumes softmax (DeepSeek-V2 files predate the
  // key), but a file with routing biases (exp_probs_b, V3's e_score_correction_bias) can only
  // be V3's sigmoid router, which older converters wrote without the key.
  const bool has_bias =
      file.find_tensor("blk." + c["first_k_dense_replace"].dump() + ".exp_probs_b.bias") != nullptr;
  const int64_t gating = m.integer("expert_gating_func").value_or(has_bias ? 2 : 1);
  if (gating != 1 && gating != 2) {
    fail(file.path(), ": metadata ", m.key("expert_gating_func"), " ", gating,
         " is not supported (1 softmax, 2 sigmoid)");
  }
  const int64_t groups = m.integer("expert_group_count").value_or(1);
  c["n_group"] = groups;
  c["topk_group"] = m.integer("expert_group_used_count").value_or(groups);
  if (gating == 2) {
    c["architectures"] = json::array({"DeepseekV3ForCausalLM"});
    c["model_type"] = "deepseek_v3";
    c["scoring_func"] = "sigmoid";
    c["topk_method"] = "noaux_tc";
  } else {
    c["scoring_func"] = "softmax";
    c["topk_method"] = groups > 1 ? "group_limited_greedy" : "greedy";
  }
}

void set_mla(const GgufFile& file, const Metadata& m, json& c) {
  const int64_t heads = c["num_attention_heads"].get<int64_t>();
  const int64_t rope_dim = m.required("rope.dimension_count");
  c["qk_rope_head_dim"] = rope_dim;
  c["kv_lora_rank"] = m.required("attention.kv_lora_rank");
  const auto q_lora = m.integer("attention.q_lora_rank").value_or(0);
  c["q_lora_rank"] = q_lora > 0 ? json(q_lora) : json(nullptr);
  // Newer converters write the per-head sizes before absorption as *_mla keys.
  const int64_t key =
      m.integer("attention.key_length_mla").value_or(m.required("attention.key_length"));
  const int64_t value =
      m.integer("attention.value_length_mla").value_or(m.required("attention.value_length"));
  if (key <= rope_dim)
    fail(file.path(), ": attention key length ", key, " <= rope dims ", rope_dim);
  c["qk_nope_head_dim"] = key - rope_dim;
  c["v_head_dim"] = value;
  c["head_dim"] = rope_dim;  // transformers' DeepSeek configs set head_dim to the rope part
  c["num_key_value_heads"] = heads;
}

}  // namespace

std::optional<std::string> gguf_model_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_regular_file(p, ec)) {
    if (p.extension() == ".gguf") return path;
    return std::nullopt;
  }
  if (!fs::is_directory(p, ec) || fs::exists(p / "config.json", ec)) return std::nullopt;
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(p, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".gguf") {
      found.push_back(entry.path().string());
    }
  }
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    fail(path, ": holds ", found.size(), " .gguf files (", found[0], ", ", found[1],
         found.size() > 2 ? ", ..." : "", "); pass the one to load as --model FILE.gguf");
  }
  if (found.empty()) return std::nullopt;
  return found[0];
}

json gguf_config_json(const GgufFile& file) {
  const auto arch = file.get_string("general.architecture");
  if (!arch) fail(file.path(), ": metadata general.architecture is missing");
  const HfFamily& family = family_of(file, *arch);
  const Metadata m(file, *arch);

  json c;
  c["architectures"] = json::array({family.architecture});
  c["model_type"] = family.model_type;
  const GgufTensorInfo* embed = file.find_tensor("token_embd.weight");
  if (embed == nullptr || embed->shape.size() != 2) {
    fail(file.path(), ": has no 2-D token_embd.weight tensor");
  }
  c["vocab_size"] = embed->shape[0];
  c["hidden_size"] = m.required("embedding_length");
  if (embed->shape[1] != c["hidden_size"].get<int64_t>()) {
    fail(file.path(), ": token_embd.weight has ", embed->shape[1], " columns but ",
         m.key("embedding_length"), " is ", c["hidden_size"].get<int64_t>());
  }
  c["num_hidden_layers"] = m.required("block_count");
  if (auto ff = m.integer("feed_forward_length"); ff && *ff > 0) c["intermediate_size"] = *ff;
  const int64_t heads = m.required("attention.head_count");
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = m.integer("attention.head_count_kv").value_or(heads);
  if (auto key = m.integer("attention.key_length")) c["head_dim"] = *key;
  if (auto ctx = m.integer("context_length")) c["max_position_embeddings"] = *ctx;
  c["rms_norm_eps"] = m.number("attention.layer_norm_rms_epsilon").value_or(1e-6);
  c["hidden_act"] = "silu";
  c["tie_word_embeddings"] = file.find_tensor("output.weight") == nullptr;
  bool attention_bias = false;
  for (const char* bias : {"attn_q", "attn_q_a", "attn_kv_a_mqa", "attn_output"}) {
    attention_bias =
        attention_bias || file.find_tensor(std::string("blk.0.") + bias + ".bias") != nullptr;
  }
  c["attention_bias"] = attention_bias;
  c["mlp_bias"] = file.find_tensor("blk.0.ffn_up.bias") != nullptr;
  if (auto bos = file.get_int("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = *bos;
  if (auto eos = file.get_int("tokenizer.ggml.eos_token_id")) c["eos_token_id"] = *eos;
  set_rope(file, m, c);
  if (*arch == "deepseek2") set_mla(file, m, c);
  set_moe(file, m, *arch, c);
  return c;
}

json gguf_generation_config_json(const GgufFile& file) {
  json g = json::object();
  json eos = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const auto id = file.get_int(key);
    if (id && std::find(eos.begin(), eos.end(), json(*id)) == eos.end()) eos.push_back(*id);
  }
  if (!eos.empty()) g["eos_token_id"] = eos;
  if (auto bos = file.get_int("tokenizer.ggml.bos_token_id")) g["bos_token_id"] = *bos;
  if (auto pad = file.get_int("tokenizer.ggml.padding_token_id")) g["pad_token_id"] = *pad;
  const auto temp = file.get_float("general.sampling.temp");
  if (temp) g["temperature"] = shortest_f32(*temp);
  if (auto top_p = file.get_float("general.sampling.top_p")) g["top_p"] = shortest_f32(*top_p);
  if (auto top_k = file.get_int("general.sampling.top_k")) g["top_k"] = *top_k;
  // transformers samples only with do_sample; a file that carries sampling settings came from
  // a generation_config.json that had them for sampling.
  g["do_sample"] = temp.has_value() && *temp > 0;
  return g;
}

}  // namespace deepinfer::io
