// load_recipe (file detection, the JSON trio's sibling files) and the flat overrides; the
// keys themselves are in recipe_table.cpp.
#include <filesystem>
#include <fstream>
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

void parse_infer_config(RecipeConfig& config, const nlohmann::json& json,
                        const std::string& source) {
  read_layout(config, json, Format::infer_config, source);
}

void parse_ep_config(RecipeConfig& config, const nlohmann::json& json, const std::string& source) {
  read_layout(config, json, Format::ep_config, source);
}

void parse_model_config(RecipeConfig& config, const nlohmann::json& json,
                        const std::string& source) {
  read_layout(config, json, Format::model_config, source);
}

void apply_override(RecipeConfig& config, const std::string& key, const nlohmann::json& value,
                    const std::string& origin, bool from_text) {
  const Setter set = override_setter(key);
  if (set == nullptr) {
    std::string list;
    for (const auto& name : override_keys()) list += str_cat(list.empty() ? "" : ", ", name);
    throw ConfigError(str_cat(origin, ": unknown setting '", key, "' (known: ", list, ")"));
  }
  if (value.is_null()) return;
  set(config, Value(value, origin, from_text, key), Mode::replace);
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

}  // namespace deepinfer::config
