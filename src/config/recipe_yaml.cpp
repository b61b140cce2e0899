// The public repository's YAML layout (model_config / data_config / parallel_config /
// scheduler_config), read with yaml-cpp into the tree the JSON files give, then through the
// one key table (recipe_table.cpp). Plain scalars are typed as PyYAML (which that
// repository uses) types them: true/false/yes/no/on/off, integers, floats, null; quoted
// scalars stay strings.
#include <cerrno>
#include <cstdlib>
#include <set>

#include <yaml-cpp/yaml.h>

#include "config/recipe_keys.h"

namespace deepinfer::config {
namespace {

nlohmann::json typed_scalar(const YAML::Node& node) {
  const std::string text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: a string whatever it looks like
  static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "Yes",
                                            "YES",  "on",   "On",   "ON"};
  static const std::set<std::string> no = {"false", "False", "FALSE", "no", "No",
                                           "NO",    "off",   "Off",   "OFF"};
  static const std::set<std::string> null = {"", "~", "null", "Null", "NULL"};
  if (yes.contains(text)) return true;
  if (no.contains(text)) return false;
  if (null.contains(text)) return nullptr;
  std::string digits;
  for (char c : text) {
    if (c != '_') digits += c;  // YAML 1.1 allows 1_000
  }
  errno = 0;
  char* end = nullptr;
  const long long integer = std::strtoll(digits.c_str(), &end, 10);
  if (!digits.empty() && *end == '\0' && errno == 0) return static_cast<int64_t>(integer);
  end = nullptr;
  const double real = std::strtod(digits.c_str(), &end);
  const bool numeric = digits.find_first_of("0123456789") != std::string::npos &&
                       digits.find_first_not_of("0123456789+-.eE") == std::string::npos;
  if (numeric && !digits.empty() && *end == '\0') return real;
  return text;
}

nlohmann::json to_json(const YAML::Node& node, const std::string& source) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return typed_scalar(node);
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(to_json(item, source));
      return out;
    }
    case YAML::NodeType::Map: {
      // ordered_json would keep file order, but errors are reported in table order anyway.
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node) {
        const std::string key = item.first.Scalar();
        if (out.contains(key))
          throw ConfigError(str_cat(source, ": key '", key, "' appears twice"));
        out[key] = to_json(item.second, source);
      }
      return out;
    }
  }
  return nullptr;
}

}  // namespace

void parse_yaml_recipe(RecipeConfig& config, const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(str_cat(source, ": malformed YAML at line ", e.mark.line + 1, ", column ",
                              e.mark.column + 1, ": ", e.msg));
  }
  read_layout(config, to_json(root, source), Format::yaml, source);
}

}  // namespace deepinfer::config
