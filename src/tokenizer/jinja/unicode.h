#pragma once
// Python str semantics on UTF-8 text: code-point indexing, Python's whitespace and line
// break sets, case mapping and character classes (through utf8proc).
#include <string>
#include <string_view>

namespace deepinfer::tokenizer::jinja::unicode {

bool valid_utf8(std::string_view s);
bool is_ascii(std::string_view s);
// Decodes valid UTF-8 (callers validate first).
std::u32string decode(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode(std::u32string_view cps);
size_t length(std::string_view s);  // number of code points

bool is_space(char32_t c);      // str.isspace / default strip() and split()
bool is_linebreak(char32_t c);  // str.splitlines boundaries
bool is_cased(char32_t c);
bool is_lower(char32_t c);
bool is_upper(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_printable(char32_t c);  // str.isprintable (repr keeps these unescaped)
bool is_word(char32_t c);       // regex \w

// Python's str.lower/upper/title/capitalize/swapcase.
std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
std::string swapcase(std::string_view s);
std::string casefold(std::string_view s);

}  // namespace deepinfer::tokenizer::jinja::unicode
