#include "server/request_fields.h"

#include <cmath>
#include <limits>

#include "server/errors.h"

namespace deepinfer::server::fields {

namespace {

std::string type_of(const Json& value) {
  if (value.is_number_float()) return "number";
  if (value.is_number()) return "integer";
  return value.type_name();
}

// Integral value of a JSON number, or nullopt when it is fractional or outside int64.
std::optional<int64_t> as_int64(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  const double d = value.get<double>();
  // 2^63 is the first double outside int64.
  if (!std::isfinite(d) || d != std::floor(d) || d < -0x1p63 || d >= 0x1p63) return std::nullopt;
  return static_cast<int64_t>(d);
}

}  // namespace

const Json* find(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number())
    bad_param(key, str_cat("'", key, "' must be a number, got ", type_of(*value)));
  return value->get<double>();
}

std::optional<int64_t> integer(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    bad_param(key, str_cat("'", key, "' must be an integer, got ", type_of(*value)));
  }
  const auto out = as_int64(*value);
  if (!out) {
    bad_param(key,
              str_cat("'", key, "' must be an integer in the 64-bit range, got ", value->dump()));
  }
  return out;
}

std::optional<bool> boolean(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    bad_param(key, str_cat("'", key, "' must be a boolean, got ", type_of(*value)));
  }
  return value->get<bool>();
}

std::optional<std::string> string(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    bad_param(key, str_cat("'", key, "' must be a string, got ", type_of(*value)));
  }
  return value->get<std::string>();
}

void check_range(const char* key, double value, std::optional<double> lo, std::optional<double> hi,
                 bool lo_open) {
  const bool ok = (!lo || (lo_open ? value > *lo : value >= *lo)) && (!hi || value <= *hi);
  if (ok) return;
  std::string range;
  if (lo && hi) {
    range = str_cat("in ", lo_open ? "(" : "[", *lo, ", ", *hi, "]");
  } else if (lo) {
    range = str_cat(lo_open ? "> " : ">= ", *lo);
  } else {
    range = str_cat("<= ", *hi);
  }
  bad_param(key, str_cat("'", key, "' must be ", range, ", got ", value));
}

std::vector<std::string> stop_strings(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (value == nullptr) return {};
  std::vector<std::string> out;
  if (value->is_string()) {
    out.push_back(value->get<std::string>());
  } else if (value->is_array()) {
    for (const Json& item : *value) {
      if (!item.is_string()) {
        bad_param(key, str_cat("'", key, "' must be a string or an array of strings, found ",
                               type_of(item), " in the array"));
      }
      out.push_back(item.get<std::string>());
    }
  } else {
    bad_param(
        key, str_cat("'", key, "' must be a string or an array of strings, got ", type_of(*value)));
  }
  for (const auto& s : out) {
    if (s.empty()) bad_param(key, str_cat("'", key, "' strings must not be empty"));
  }
  return out;
}

std::vector<int64_t> id_list(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (value == nullptr) return {};
  if (!value->is_array()) {
    bad_param(key, str_cat("'", key, "' must be an array of integers, got ", type_of(*value)));
  }
  std::vector<int64_t> out;
  for (const Json& item : *value) {
    const auto id = item.is_number() ? as_int64(item) : std::nullopt;
    if (!id)
      bad_param(key, str_cat("'", key, "' must be an array of integers, found ", item.dump()));
    out.push_back(*id);
  }
  return out;
}

std::vector<std::string> unknown_keys(const Json& object, const std::set<std::string>& known) {
  std::vector<std::string> out;
  for (const auto& [key, value] : object.items()) {
    if (!known.contains(key)) out.push_back(key);
  }
  return out;
}

}  // namespace deepinfer::server::fields
