// Value: typed reads with the origin in every error.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "config/recipe_keys.h"

namespace deepinfer::config {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

std::string Value::shown() const {
  return json_.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t Value::integer() const {
  if (from_text_ && json_.is_string()) {
    const std::string text = json_.get<std::string>();
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE) {
      throw ConfigError(str_cat(origin_, ": expected an integer, got '", text, "'"));
    }
    return v;
  }
  if (!json_.is_number_integer() ||
      (json_.is_number_unsigned() && json_.get<uint64_t>() > INT64_MAX)) {
    throw ConfigError(
        str_cat(origin_, ": expected an integer, got ", json_.type_name(), " ", shown()));
  }
  return json_.get<int64_t>();
}

int64_t Value::positive() const {
  const int64_t v = integer();
  if (v <= 0) reject("must be a positive integer");
  return v;
}

double Value::number() const {
  double v = 0;
  if (from_text_ && json_.is_string()) {
    const std::string text = json_.get<std::string>();
    char* end = nullptr;
    v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') {
      throw ConfigError(str_cat(origin_, ": expected a number, got '", text, "'"));
    }
  } else if (json_.is_number()) {
    v = json_.get<double>();
  } else {
    throw ConfigError(
        str_cat(origin_, ": expected a number, got ", json_.type_name(), " ", shown()));
  }
  if (!std::isfinite(v)) reject("must be a finite number");
  return v;
}

bool Value::boolean() const {
  if (from_text_ && json_.is_string()) {
    const std::string text = lower(json_.get<std::string>());
    if (text == "true" || text == "1") return true;
    if (text == "false" || text == "0") return false;
  }
  if (!json_.is_boolean()) {
    throw ConfigError(
        str_cat(origin_, ": expected true or false, got ", json_.type_name(), " ", shown()));
  }
  return json_.get<bool>();
}

std::string Value::string() const {
  if (!json_.is_string()) {
    throw ConfigError(
        str_cat(origin_, ": expected a string, got ", json_.type_name(), " ", shown()));
  }
  return json_.get<std::string>();
}

std::vector<int64_t> Value::int_list() const {
  std::vector<int64_t> out;
  if (json_.is_string()) {
    // "0,1,2" (a flag, or a string in a file as the articles' scripts take it).
    const std::string text = json_.get<std::string>();
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      const nlohmann::json item = text.substr(start, comma - start);
      out.push_back(Value(item, origin_, true).integer());
      start = comma + 1;
    }
  } else if (json_.is_array()) {
    for (const auto& item : json_) out.push_back(Value(item, origin_).integer());
  } else if (json_.is_number_integer()) {
    out.push_back(integer());
  } else {
    throw ConfigError(str_cat(origin_, ": expected a list of integers like \"0,1,2\", got ",
                              json_.type_name(), " ", shown()));
  }
  return out;
}

}  // namespace deepinfer::config
