#pragma once
// JSON <-> template values. Object key order is kept as given (use nlohmann::ordered_json
// to keep a request's key order: Python dicts, and therefore tojson, preserve it).
#include <nlohmann/json.hpp>

#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

// Fails (Error) on invalid UTF-8, integers beyond 64 bits and nesting beyond kMaxValueDepth.
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

}  // namespace deepinfer::tokenizer::jinja
