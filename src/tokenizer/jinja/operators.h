#pragma once
// Python's operators on template values: arithmetic (with checked 64-bit integers where
// Python would grow a big integer), comparisons, `in`, and printf-style `%` formatting.
#include <cstddef>
#include <cstdint>

#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

// max_bytes bounds a string result, max_items a list result.
Value binary_op(BinOp op, const Value& a, const Value& b, size_t max_bytes,
                size_t max_items = SIZE_MAX);
Value negate(const Value& v);
Value positive(const Value& v);
bool compare(CmpOp op, const Value& a, const Value& b);
// Python a < b; fails like Python for unorderable types.
bool python_less(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// str % args
std::string percent_format(const std::string& format, const Value& args, size_t max_size);

// Raises what jinja2 raises when an undefined value is used in an operation.
[[noreturn]] void undefined_fail(const Value& undefined);

const char* binop_symbol(BinOp op);

}  // namespace deepinfer::tokenizer::jinja
