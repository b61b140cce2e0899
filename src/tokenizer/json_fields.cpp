#include "tokenizer/json_fields.h"

#include "core/error.h"
#include "tokenizer/regex.h"

namespace deepinfer::tokenizer {

std::string json_type(const nlohmann::json& json, const char* what, const std::string& source) {
  DI_CHECK(json.is_object(), source, ": ", what, ": expected an object, got ", json.type_name());
  const auto it = json.find("type");
  DI_CHECK(it != json.end() && it->is_string(), source, ": ", what,
           ": missing string field \"type\"");
  return it->get<std::string>();
}

const nlohmann::json& json_array(const nlohmann::json& json, const char* key,
                                 const std::string& where) {
  const auto it = json.find(key);
  DI_CHECK(it != json.end() && it->is_array(), where, ": missing array field \"", key, "\"");
  return *it;
}

std::string json_string(const nlohmann::json& json, const char* key, const std::string& where) {
  const auto it = json.find(key);
  DI_CHECK(it != json.end() && it->is_string(), where, ": missing string field \"", key, "\"");
  return it->get<std::string>();
}

std::string json_string_or(const nlohmann::json& json, const char* key, std::string fallback,
                           const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  DI_CHECK(it->is_string(), where, ": field \"", key, "\" must be a string");
  return it->get<std::string>();
}

bool json_bool(const nlohmann::json& json, const char* key, bool fallback,
               const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  DI_CHECK(it->is_boolean(), where, ": field \"", key, "\" must be true or false");
  return it->get<bool>();
}

int64_t json_int(const nlohmann::json& json, const char* key, int64_t fallback,
                 const std::string& where) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  DI_CHECK(it->is_number_integer(), where, ": field \"", key, "\" must be an integer");
  return it->get<int64_t>();
}

std::shared_ptr<const Regex> json_pattern(const nlohmann::json& json, const char* key,
                                          const std::string& where) {
  const auto it = json.find(key);
  DI_CHECK(it != json.end(), where, ": missing field \"", key, "\"");
  if (it->is_object()) {
    if (const auto s = it->find("String"); s != it->end() && s->is_string()) {
      return Regex::literal(s->get<std::string>());
    }
    if (const auto r = it->find("Regex"); r != it->end() && r->is_string()) {
      return Regex::compile(r->get<std::string>(), where);
    }
  }
  // Older files store a bare string (a literal).
  if (it->is_string()) return Regex::literal(it->get<std::string>());
  fail(where, ": field \"", key, "\" must be {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace deepinfer::tokenizer
