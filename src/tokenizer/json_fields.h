#pragma once
// Typed field access for tokenizer.json components; every error names the file and the
// component (`where`) so a user can find the offending entry.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

class Regex;

// The "type" of a component object; `what` is e.g. "normalizer".
std::string json_type(const nlohmann::json& json, const char* what, const std::string& source);
const nlohmann::json& json_array(const nlohmann::json& json, const char* key,
                                 const std::string& where);
std::string json_string(const nlohmann::json& json, const char* key, const std::string& where);
std::string json_string_or(const nlohmann::json& json, const char* key, std::string fallback,
                           const std::string& where);
bool json_bool(const nlohmann::json& json, const char* key, bool fallback,
               const std::string& where);
int64_t json_int(const nlohmann::json& json, const char* key, int64_t fallback,
                 const std::string& where);
// {"String": "..."} or {"Regex": "..."}, as Split, Replace and the Replace decoder use.
std::shared_ptr<const Regex> json_pattern(const nlohmann::json& json, const char* key,
                                          const std::string& where);

}  // namespace deepinfer::tokenizer
