// Python's printf-style `str % args` (also the `format` filter).
#include <cmath>
#include <cstdio>
#include <string>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char type = 's';
};

std::string pad(std::string text, const Spec& spec) {
  const size_t len = unicode::length(text);
  if (spec.width < 0 || len >= static_cast<size_t>(spec.width)) return text;
  const size_t fill = static_cast<size_t>(spec.width) - len;
  if (spec.flags.find('-') != std::string::npos) return text + std::string(fill, ' ');
  return std::string(fill, ' ') + text;
}

std::string c_format(const Spec& spec, const char* length, double f, long long i, bool is_float) {
  std::string fmt = "%" + spec.flags;
  if (spec.width >= 0) fmt += std::to_string(spec.width);
  if (spec.precision >= 0) fmt += "." + std::to_string(spec.precision);
  fmt += length;
  fmt += spec.type;
  // Width and precision are bounded (10000) when parsed, so the text is too.
  const int n = is_float ? std::snprintf(nullptr, 0, fmt.c_str(), f)
                         : std::snprintf(nullptr, 0, fmt.c_str(), i);
  if (n < 0) runtime_fail("bad % format");
  std::string out(static_cast<size_t>(n) + 1, '\0');
  if (is_float) {
    std::snprintf(out.data(), out.size(), fmt.c_str(), f);
  } else {
    std::snprintf(out.data(), out.size(), fmt.c_str(), i);
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string format_one(const Spec& spec, const Value& v, size_t max_size) {
  switch (spec.type) {
    case 's': {
      std::string s = to_str(v, max_size);
      if (spec.precision >= 0) {
        const std::u32string cps = unicode::decode(s);
        if (cps.size() > static_cast<size_t>(spec.precision)) {
          s = unicode::encode(
              std::u32string_view(cps).substr(0, static_cast<size_t>(spec.precision)));
        }
      }
      return pad(std::move(s), spec);
    }
    case 'r':
    case 'a':
      return pad(to_repr(v, max_size), spec);
    case 'c': {
      if (v.is_string() && unicode::length(v.str()) == 1) return pad(v.str(), spec);
      if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
        std::string s;
        unicode::append_utf8(s, static_cast<char32_t>(v.as_int()));
        return pad(s, spec);
      }
      runtime_fail("%c requires an int or a unicode character");
    }
    case 'd':
    case 'i':
    case 'u': {
      if (!v.is_number())
        runtime_fail("%", spec.type, " format: a real number is required, not ", type_name(v));
      Spec s = spec;
      s.type = 'd';
      const double f = v.as_float();
      if (v.is_float() && (!std::isfinite(f) || std::fabs(f) > 9e18))
        unsupported("%d of a huge float");
      const long long i = v.is_float() ? static_cast<long long>(f) : v.as_int();
      return c_format(s, "ll", 0, i, false);
    }
    case 'x':
    case 'X':
    case 'o': {
      if (!v.is_integral())
        runtime_fail("%", spec.type, " format: an integer is required, not ", type_name(v));
      if (v.as_int() < 0) unsupported("%", spec.type, " of a negative number");
      return c_format(spec, "ll", 0, v.as_int(), false);
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
      if (!v.is_number()) runtime_fail("must be real number, not ", type_name(v));
      return c_format(spec, "", v.as_float(), 0, true);
    default:
      runtime_fail("unsupported format character '", spec.type, "'");
  }
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args, size_t max_size) {
  const bool is_tuple = args.is_sequence_kind(SeqKind::Tuple);
  const bool is_mapping = args.is_dict();
  // CPython checks "all arguments converted" only when the argument is not a mapping, and
  // anything with __getitem__ counts as one (lists, ranges, Undefined).
  const bool mapping_like = is_mapping || args.is_undefined() ||
                            (args.is_list() && (args.list_data().kind == SeqKind::List ||
                                                args.list_data().kind == SeqKind::Range));
  ValueList positional;
  if (is_tuple) {
    positional = args.items();
  } else {
    positional.push_back(args);
  }
  size_t next_arg = 0;
  bool used_mapping = false;
  auto take = [&]() -> const Value& {
    if (next_arg >= positional.size()) runtime_fail("not enough arguments for format string");
    return positional[next_arg++];
  };
  std::string out;
  size_t i = 0;
  while (i < format.size()) {
    const char c = format[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i >= format.size()) runtime_fail("incomplete format");
    if (format[i] == '%') {  // "%%" only directly after the '%'
      out += '%';
      ++i;
      continue;
    }
    const Value* mapped = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) runtime_fail("incomplete format key");
      if (!is_mapping) runtime_fail("format requires a mapping");
      mapped = args.dict().find(std::string_view(format).substr(i + 1, close - i - 1));
      if (!mapped) runtime_fail("format key '", format.substr(i + 1, close - i - 1), "' not found");
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    while (i < format.size() && std::string("-+ 0#").find(format[i]) != std::string::npos) {
      spec.flags += format[i++];
    }
    auto read_number = [&](int& target) {
      if (i < format.size() && format[i] == '*') {
        const Value& w = take();
        if (!w.is_integral()) runtime_fail("* wants int");
        target = static_cast<int>(std::min<int64_t>(w.as_int(), 10000));
        ++i;
        return;
      }
      int n = -1;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        n = (n < 0 ? 0 : n) * 10 + (format[i++] - '0');
        if (n > 10000) limit_fail("% format width too large");
      }
      target = n;
    };
    read_number(spec.width);
    if (i < format.size() && format[i] == '.') {
      ++i;
      read_number(spec.precision);
      if (spec.precision < 0) spec.precision = 0;
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) runtime_fail("incomplete format");
    spec.type = format[i++];
    if (spec.type == '%') {
      // Python consumes an argument for it before rejecting the conversion.
      if (!mapped) take();
      runtime_fail("unsupported format character '%' (0x25) at index ", i - 1);
    }
    out += format_one(spec, mapped ? *mapped : take(), max_size);
    if (out.size() > max_size) limit_fail("formatted string larger than ", max_size);
  }
  if (!used_mapping && next_arg < positional.size() && !mapping_like) {
    runtime_fail("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace deepinfer::tokenizer::jinja
