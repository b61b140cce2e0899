#pragma once
// Python's int(str, base) and float(str) parsing (whitespace, signs, underscores, prefixes,
// inf / nan), for the int and float filters.
#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer::tokenizer::jinja {

// nullopt when Python would raise ValueError; fails (Unsupported) beyond 64 bits.
std::optional<int64_t> parse_python_int(std::string_view text, int64_t base);
std::optional<double> parse_python_float(std::string_view text);

}  // namespace deepinfer::tokenizer::jinja
