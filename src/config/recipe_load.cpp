// load_recipe (file detection, sibling files) and the flat override keys.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "config/recipe_keys.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(str_cat(what, " ", path.string(), ": cannot be opened (",
                              fs::exists(path) ? "permission denied?" : "no such file",
                              "); pass an infer_config.json or a .yaml recipe, e.g. "
                              "configs/qwen/infer_config.json"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(str_cat(source, ": malformed JSON: ", e.what()));
  }
}

bool is_yaml(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".yaml" || ext == ".yml";
}

const std::map<std::string, Setter>& override_table() {
  static const std::map<std::string, Setter> table = {
      {"model_path", set::model_path},
      {"model", set::model_path},
      {"model_name", set::model_name},
      {"served_model_name", set::model_name},
      {"precision_mode", set::precision_mode},
      {"dtype", set::precision_mode},
      {"enable_atb_attention", set::atb_attention},
      {"enable_atb_moe", set::atb_moe},
      {"tensor_parallel_size", set::tensor_parallel_size},
      {"pipeline_parallel_size", set::pipeline_parallel_size},
      {"expert_parallel_size", set::expert_parallel_size},
      {"ep_size", set::expert_parallel_size},
      {"world_size", set::world_size},
      {"devices", set::devices},
      {"npu_devices", set::devices},
      {"threads", set::threads},
      {"use_paged_attention", set::use_paged_attention},
      {"block_size", set::block_size},
      {"max_num_blocks", set::max_num_blocks},
      {"kv_cache_memory", set::kv_cache_memory},
      {"mem_fraction_static", set::mem_fraction_static},
      {"kv_cache_dtype", set::kv_cache_dtype},
      {"enable_kv_cache_quant", set::enable_kv_cache_quant},
      {"max_num_seqs", set::max_num_seqs},
      {"max_batch_size", set::max_num_seqs},
      {"max_model_len", set::max_model_len},
      {"max_seq_len", set::max_model_len},
      {"max_num_batched_tokens", set::max_num_batched_tokens},
      {"input_truncated_len", set::max_prompt_len},
      {"enable_prefix_caching", set::enable_prefix_caching},
      {"scheduling_policy", set::scheduling_policy},
      {"do_sample", set::do_sample},
      {"temperature", set::temperature},
      {"top_p", set::top_p},
      {"top_k", set::top_k},
      {"repetition_penalty", set::repetition_penalty},
      {"max_new_tokens", set::max_new_tokens},
      {"seed", set::seed},
      {"exe_mode", set::exe_mode},
  };
  return table;
}

}  // namespace

RecipeConfig load_recipe(const std::string& path_text) {
  fs::path path(path_text);
  if (fs::is_directory(path)) path /= "infer_config.json";
  RecipeConfig config;
  config.source = path.string();
  const std::string text = read_file(path, "--config");
  if (is_yaml(path)) {
    parse_yaml_recipe(config, text, path.string());
    return config;
  }
  const std::string name = path.filename().string();
  if (name == "ep_config.json" || name == "model_config.json") {
    throw ConfigError(str_cat(path.string(), ": pass the infer_config.json beside it; ", name,
                              " is read together with it from the same directory"));
  }
  parse_infer_config(config, parse_json(text, path.string()), path.string());
  const fs::path dir = path.parent_path();
  for (const char* sibling : {"model_config.json", "ep_config.json"}) {
    const fs::path file = dir / sibling;
    if (!fs::exists(file)) continue;
    const nlohmann::json json = parse_json(read_file(file, sibling), file.string());
    if (std::string(sibling) == "ep_config.json") {
      parse_ep_config(config, json, file.string());
    } else {
      parse_model_config(config, json, file.string());
    }
  }
  return config;
}

void apply_override(RecipeConfig& config, const std::string& key, const nlohmann::json& value,
                    const std::string& origin, bool from_text) {
  const auto& table = override_table();
  const auto it = table.find(key);
  if (it == table.end()) {
    std::string list;
    for (const auto& name : override_keys()) list += str_cat(list.empty() ? "" : ", ", name);
    throw ConfigError(str_cat(origin, ": unknown setting '", key, "' (known: ", list, ")"));
  }
  if (value.is_null()) return;
  it->second(config, Value(value, origin, from_text), Mode::replace);
  if (key == "temperature") {
    // An explicit temperature decides between greedy (0) and sampling, whatever do_sample the
    // file says: the override wins as a whole.
    config.do_sample.value = *config.temperature > 0;
    config.do_sample.origin = origin;
  }
}

void apply_overrides(RecipeConfig& config, const nlohmann::json& overrides,
                     const std::string& origin) {
  if (!overrides.is_object()) {
    throw ConfigError(str_cat(origin, ": overrides must be an object of settings"));
  }
  for (const auto& [key, value] : overrides.items()) {
    apply_override(config, key, value, str_cat(origin, ": ", key));
  }
}

const std::vector<std::string>& override_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const auto& [name, setter] : override_table()) out.push_back(name);
    return out;
  }();
  return keys;
}

}  // namespace deepinfer::config
