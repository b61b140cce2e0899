#pragma once
// Typed reads of request fields: a JSON null counts as absent (as in the OpenAI SDKs and
// vLLM's pydantic models), a wrong type is a 400 naming the field.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::server::fields {

using Json = nlohmann::ordered_json;

// The value of `key`, or nullptr when absent or null.
const Json* find(const Json& object, const char* key);

std::optional<double> number(const Json& object, const char* key);
// Integers; a float with an integral value (3.0) is accepted, as pydantic does.
std::optional<int64_t> integer(const Json& object, const char* key);
std::optional<bool> boolean(const Json& object, const char* key);
std::optional<std::string> string(const Json& object, const char* key);

// Checks a read value against [lo, hi] (either bound optional), naming the field.
void check_range(const char* key, double value, std::optional<double> lo, std::optional<double> hi,
                 bool lo_open = false);

// "stop": a string or an array of non-empty strings.
std::vector<std::string> stop_strings(const Json& object, const char* key);
// An array of integer token ids.
std::vector<int64_t> id_list(const Json& object, const char* key);

// Keys of `object` not in `known`, in request order.
std::vector<std::string> unknown_keys(const Json& object, const std::set<std::string>& known);

}  // namespace deepinfer::server::fields
