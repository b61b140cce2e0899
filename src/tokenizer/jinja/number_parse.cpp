#include "tokenizer/jinja/number_parse.h"

#include <charconv>
#include <cmath>
#include <string>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace deepinfer::tokenizer::jinja {

namespace {

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
  }
  return true;
}

// Digits with single underscores between them (Python's numeric literal grammar).
bool strip_underscores(std::string_view in, std::string& out, bool allow_leading) {
  out.clear();
  bool prev_digit = allow_leading;
  for (char c : in) {
    if (c == '_') {
      if (!prev_digit) return false;
      prev_digit = false;
      continue;
    }
    out += c;
    prev_digit = true;
  }
  return prev_digit && !out.empty();
}

}  // namespace

std::optional<int64_t> parse_python_int(std::string_view text, int64_t base) {
  const std::string stripped = pystr::strip(text, std::nullopt, true, true);
  std::string_view s = stripped;
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  bool prefixed = false;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int64_t prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefix_base && (base == 0 || base == prefix_base)) {
      base = prefix_base;
      s.remove_prefix(2);
      prefixed = true;
    }
  }
  if (base == 0) {
    base = 10;
    // base 0 forbids leading zeros in non-zero decimals
    if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string_view::npos) {
      return std::nullopt;
    }
  }
  std::string digits;
  if (!strip_underscores(s, digits, prefixed)) return std::nullopt;
  for (char c : digits) {
    if (digit_value(c) >= base) return std::nullopt;
  }
  uint64_t value = 0;
  auto res =
      std::from_chars(digits.data(), digits.data() + digits.size(), value, static_cast<int>(base));
  if (res.ec == std::errc::result_out_of_range ||
      value > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0)) {
    unsupported("integer beyond 64 bits");
  }
  if (res.ec != std::errc() || res.ptr != digits.data() + digits.size()) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
}

std::optional<double> parse_python_float(std::string_view text) {
  const std::string stripped = pystr::strip(text, std::nullopt, true, true);
  std::string_view s = stripped;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  double value;
  if (iequals(s, "inf") || iequals(s, "infinity")) {
    value = HUGE_VAL;
  } else if (iequals(s, "nan")) {
    value = std::nan("");
  } else {
    // mantissa digits [. digits] [e [sign] digits], underscores only between digits
    std::string clean;
    size_t i = 0;
    auto digit_run = [&](bool required) {
      const size_t start = i;
      while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_')) ++i;
      std::string part;
      if (i == start) return !required;
      if (!strip_underscores(s.substr(start, i - start), part, false)) return false;
      clean += part;
      return true;
    };
    const size_t before = clean.size();
    if (!digit_run(false)) return std::nullopt;
    const bool int_part = clean.size() > before;
    if (i < s.size() && s[i] == '.') {
      clean += '.';
      ++i;
      const size_t frac_start = clean.size();
      if (!digit_run(false)) return std::nullopt;
      if (!int_part && clean.size() == frac_start) return std::nullopt;
    } else if (!int_part) {
      return std::nullopt;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      clean += 'e';
      ++i;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
      if (!digit_run(true)) return std::nullopt;
    }
    if (i != s.size()) return std::nullopt;
    auto res = std::from_chars(clean.data(), clean.data() + clean.size(), value);
    if (res.ec == std::errc::result_out_of_range) {
      const size_t e = clean.find('e');
      value =
          (e != std::string::npos && e + 1 < clean.size() && clean[e + 1] == '-') ? 0.0 : HUGE_VAL;
    } else if (res.ec != std::errc()) {
      return std::nullopt;
    }
  }
  return negative ? -value : value;
}

}  // namespace deepinfer::tokenizer::jinja
