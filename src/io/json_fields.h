#pragma once
// Typed lookups into one JSON object of a config file, with errors "<source>: <key>: <problem>".
// A key whose value is null counts as absent: Hugging Face configs write null for "unset".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace deepinfer::io {

class JsonFields {
 public:
  // `prefix` names the object inside the file, e.g. "rope_scaling." (keys are appended to it).
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  const nlohmann::json* find(const std::string& key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  template <typename... Parts>
  [[noreturn]] void fail_key(const std::string& key, Parts&&... problem) const {
    fail(source_, ": ", prefix_, key, ": ", std::forward<Parts>(problem)...);
  }

  std::optional<int64_t> integer(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX)) {
      fail_key(key, "expected an integer, got ", v->type_name(), " ", v->dump());
    }
    return v->get<int64_t>();
  }
  int64_t required_positive(const std::string& key) const {
    if (!has(key)) fail_key(key, "missing (required)");
    return *positive(key);
  }
  std::optional<int64_t> positive(const std::string& key) const {
    const auto v = integer(key);
    if (v && *v <= 0) fail_key(key, "must be positive, got ", *v);
    return v;
  }
  std::optional<int64_t> token_id(const std::string& key) const {
    const auto v = integer(key);
    if (v && *v < 0) fail_key(key, "token id must be non-negative, got ", *v);
    return v;
  }
  // An integer or a list of integers (eos_token_id).
  std::vector<int64_t> token_ids(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_array()) return {*token_id(key)};
    std::vector<int64_t> out;
    for (const nlohmann::json& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        fail_key(key, "expected a token id or a list of token ids, got ", v->dump());
      }
      out.push_back(id.get<int64_t>());
    }
    return out;
  }
  std::optional<double> number(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail_key(key, "expected a number, got ", v->type_name(), " ", v->dump());
    return v->get<double>();
  }
  std::optional<double> positive_number(const std::string& key) const {
    const auto v = number(key);
    if (v && !(*v > 0)) fail_key(key, "must be positive, got ", *v);
    return v;
  }
  std::optional<bool> boolean(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) fail_key(key, "expected true or false, got ", v->dump());
    return v->get<bool>();
  }
  std::optional<std::string> string(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) fail_key(key, "expected a string, got ", v->type_name(), " ", v->dump());
    return v->get<std::string>();
  }

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace deepinfer::io
