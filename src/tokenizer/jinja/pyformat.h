#pragma once
// Text forms of values exactly as Python produces them: str() (what {{ x }} prints), repr()
// (inside printed containers) and json.dumps (transformers' tojson filter).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

std::string float_repr(double f);
std::string string_repr(std::string_view s);
// str(v); Undefined prints as "". Output beyond max_bytes fails with a Limit error.
std::string to_str(const Value& v, size_t max_bytes);
std::string to_repr(const Value& v, size_t max_bytes);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;    // None: single line
  std::optional<std::string> item_sep;  // default ", " (or "," with indent)
  std::optional<std::string> key_sep;   // default ": "
  bool sort_keys = false;
};

// json.dumps(v, ...) with Python's formatting of floats, separators and escapes.
std::string to_json(const Value& v, const JsonOptions& options, size_t max_bytes);

// markupsafe.escape of a string.
std::string html_escape(std::string_view s);

}  // namespace deepinfer::tokenizer::jinja
