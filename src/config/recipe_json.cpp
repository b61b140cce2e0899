// The articles' JSON configs: infer_config.json (five sections), ep_config.json and
// model_config.json (flat). Key names map onto the setters of recipe_keys.h.
#include <set>

#include "config/recipe_keys.h"

namespace deepinfer::config {
namespace {

// Architecture values the checkpoint's config.json must agree with.
#define DI_EXPECT_INT(key)                                                        \
  {                                                                               \
    key, [](RecipeConfig& c, const Value& v, Mode) { expect_integer(c, key, v); } \
  }

const std::vector<KeySpec>& model_keys() {
  static const std::vector<KeySpec> keys = {
      {"model_path", set::model_path},
      {"model_type",
       [](RecipeConfig& c, const Value& v, Mode) { expect_string(c, "model_type", v); }},
      DI_EXPECT_INT("vocab_size"),
      DI_EXPECT_INT("hidden_size"),
      DI_EXPECT_INT("intermediate_size"),
      DI_EXPECT_INT("num_hidden_layers"),
      DI_EXPECT_INT("num_attention_heads"),
      DI_EXPECT_INT("num_key_value_heads"),
      DI_EXPECT_INT("max_position_embeddings"),
      {"rope_theta",
       [](RecipeConfig& c, const Value& v, Mode) { expect_number(c, "rope_theta", v); }},
  };
  return keys;
}
#undef DI_EXPECT_INT

const std::vector<KeySpec>& parallel_keys() {
  static const std::vector<KeySpec> keys = {
      {"tensor_parallel_size", set::tensor_parallel_size},
      {"pipeline_parallel_size", set::pipeline_parallel_size},
      {"expert_parallel_size", set::expert_parallel_size},
  };
  return keys;
}

// kv_cache section of infer_config.json and the flat model_config.json share these.
const std::vector<KeySpec>& kv_cache_keys() {
  static const std::vector<KeySpec> keys = {
      {"use_paged_attention", set::use_paged_attention},
      {"block_size", set::block_size},
      {"max_num_blocks", set::max_num_blocks},
  };
  return keys;
}

const std::vector<KeySpec>& atb_keys() {
  static const std::vector<KeySpec> keys = {
      {"enable_atb_attention", set::atb_attention},
      {"enable_atb_moe", set::atb_moe},
      {"precision_mode", set::precision_mode},
  };
  return keys;
}

const std::vector<KeySpec>& inference_keys() {
  static const std::vector<KeySpec> keys = {
      {"max_batch_size", set::max_num_seqs},
      {"max_seq_len", set::max_model_len},
      {"do_sample", set::do_sample},
      {"temperature", set::temperature},
      {"top_p", set::top_p},
      {"top_k", set::top_k},
      {"repetition_penalty", set::repetition_penalty},
      // deepinfer additions (docs/CONFIG.md).
      {"max_new_tokens", set::max_new_tokens},
      {"seed", set::seed},
  };
  return keys;
}

const std::vector<KeySpec>& ep_keys() {
  static const std::vector<KeySpec> keys = {
      {"ep_size", set::expert_parallel_size},
      {"num_experts", set::num_experts},
      {"top_k", set::experts_top_k},
      {"capacity_factor", set::capacity_factor},
      {"expert_parallel_mode", set::expert_parallel_mode},
      {"communication_dtype", set::communication_dtype},
  };
  return keys;
}

const std::vector<KeySpec>& model_config_keys() {
  static const std::vector<KeySpec> keys = {
      {"use_paged_attention", set::use_paged_attention},
      {"block_size", set::block_size},
      {"max_num_blocks", set::max_num_blocks},
      {"kv_cache_dtype", set::kv_cache_dtype},
      {"enable_kv_cache_quant", set::enable_kv_cache_quant},
  };
  return keys;
}

}  // namespace

void parse_infer_config(RecipeConfig& config, const nlohmann::json& json,
                        const std::string& source) {
  struct Section {
    const char* name;
    const std::vector<KeySpec>& keys;
  };
  const Section sections[] = {{"model", model_keys()},
                              {"parallel", parallel_keys()},
                              {"kv_cache", kv_cache_keys()},
                              {"atb", atb_keys()},
                              {"inference", inference_keys()}};
  if (!json.is_object()) {
    throw ConfigError(str_cat(source,
                              ": expected a JSON object with the sections model, "
                              "parallel, kv_cache, atb and inference"));
  }
  std::set<std::string> known;
  for (const Section& section : sections) {
    known.insert(section.name);
    const auto it = json.find(section.name);
    if (it == json.end() || it->is_null()) continue;
    read_keys(config, *it, section.keys, source, std::string(section.name) + ".");
  }
  for (const auto& [name, value] : json.items()) {
    if (known.contains(name)) continue;
    std::string hint;
    if (name == "ep_size" || name == "num_experts" || name == "kv_cache_dtype" ||
        name == "enable_kv_cache_quant") {
      hint =
          " (it belongs in ep_config.json / model_config.json beside this file, which are read "
          "with it)";
    }
    throw ConfigError(str_cat(source, ": unknown section '", name,
                              "': expected model, parallel, kv_cache, atb and inference", hint,
                              "; see docs/CONFIG.md"));
  }
}

void parse_ep_config(RecipeConfig& config, const nlohmann::json& json, const std::string& source) {
  read_keys(config, json, ep_keys(), source, "");
}

void parse_model_config(RecipeConfig& config, const nlohmann::json& json,
                        const std::string& source) {
  // int8 quantization against an explicit other dtype in the same file: report the conflict
  // itself, before either value alone is judged.
  if (json.is_object()) {
    const auto quant = json.find("enable_kv_cache_quant");
    const auto dtype = json.find("kv_cache_dtype");
    if (quant != json.end() && *quant == true && dtype != json.end() && dtype->is_string() &&
        *dtype != "int8" && *dtype != "auto") {
      throw ConfigError(str_cat(source,
                                ": enable_kv_cache_quant = true asks for an int8 KV cache "
                                "but kv_cache_dtype = ",
                                dtype->dump(),
                                "; remove one of them (or set kv_cache_dtype to \"int8\")"));
    }
  }
  read_keys(config, json, model_config_keys(), source, "");
}

}  // namespace deepinfer::config
