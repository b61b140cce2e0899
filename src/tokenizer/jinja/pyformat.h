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

// Building blocks of the printers above (str/repr and json.dumps).

// Printing recurses through containers, which are depth-limited, but namespaces can nest
// lists that hold namespaces (or themselves): Python would report recursion there too.
inline constexpr int kMaxPrintDepth = 2 * static_cast<int>(kMaxValueDepth);

// Fails (Runtime) with "value nested too deeply <why>" beyond kMaxPrintDepth.
void check_print_depth(int depth, const char* why);

// Output text bounded in size: a Limit error "<what> larger than N bytes" past max_bytes, so
// a template cannot print its way out of memory.
class BoundedText {
 public:
  BoundedText(size_t max_bytes, const char* what) : max_(max_bytes), what_(what) {}
  void add(std::string_view s);
  void add(char c) { add(std::string_view(&c, 1)); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  size_t max_;
  const char* what_;
};

// Appends prefix + value in `digits` lower-case hex digits ("\\u00e9", "\\x7f").
void append_hex(std::string& out, const char* prefix, unsigned value, int digits);

}  // namespace deepinfer::tokenizer::jinja
