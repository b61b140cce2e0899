#pragma once
// Python str methods on UTF-8 strings, with Python's code-point indices and whitespace.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer::jinja::pystr {

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / str.rsplit (sep nullopt: runs of whitespace); maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// count < 0: all occurrences. Fails past max_size bytes.
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count,
                    size_t max_size);
// Code-point index of the first / last occurrence in s[start:end], or -1.
int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse);
int64_t count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
              std::optional<int64_t> end);
bool starts_with(std::string_view s, std::string_view prefix, std::optional<int64_t> start,
                 std::optional<int64_t> end, bool at_end);
// str.center / ljust / rjust with a one-character fill.
std::string pad(std::string_view s, int64_t width, std::string_view fill, char align,
                size_t max_size);
std::string zfill(std::string_view s, int64_t width, size_t max_size);
// Python's str.title (not jinja's title filter).
bool is_title(std::string_view s);

}  // namespace deepinfer::tokenizer::jinja::pystr
