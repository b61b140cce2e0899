#pragma once
// Argument coercions shared by methods and filters (Python's type checks), and the
// dict / list / str.format method tables.
#include <cstdint>
#include <optional>
#include <string>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

// None or missing -> nullopt; a str -> its text; anything else fails naming `fn`.
std::optional<std::string> opt_str(const std::optional<Value>& v, const char* fn);
std::string req_str(const std::optional<Value>& v, const char* fn);
int64_t opt_int(const std::optional<Value>& v, const char* fn, int64_t fallback);
int64_t req_int(const std::optional<Value>& v, const char* fn);
// Slice-style index argument: None or missing -> nullopt.
std::optional<int64_t> opt_index(const std::optional<Value>& v, const char* fn);

Value str_format_method(Interpreter& in, const Value& self, CallArgs& args);
std::optional<Value> dict_method(const Value& self, const std::string& name);
std::optional<Value> list_method(const Value& self, const std::string& name);

}  // namespace deepinfer::tokenizer::jinja
