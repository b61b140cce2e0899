#include "tokenizer/jinja/pyformat.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

void enter(int depth) {
  check_print_depth(depth, "(or recursive) to print");
}

// Nesting across repr() calls (an object's repr prints its contents through to_repr again).
thread_local int t_repr_nesting = 0;

struct ReprNesting {
  ReprNesting() {
    if (++t_repr_nesting > kMaxPrintDepth) {
      --t_repr_nesting;
      runtime_fail("value nested too deeply (or recursive) to print");
    }
  }
  ~ReprNesting() { --t_repr_nesting; }
};

void write_repr(BoundedText& w, const Value& v, int depth);

void write_items(BoundedText& w, const ValueList& items, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) w.add(", ");
    write_repr(w, items[i], depth + 1);
  }
}

void write_repr(BoundedText& w, const Value& v, int depth) {
  enter(depth);
  ReprNesting nesting;
  switch (v.type()) {
    case Type::Undefined:
      w.add("Undefined");
      return;
    case Type::String:
      if (v.is_markup()) {
        w.add("Markup(");
        w.add(string_repr(v.str()));
        w.add(")");
      } else {
        w.add(string_repr(v.str()));
      }
      return;
    case Type::List: {
      const ListData& data = v.list_data();
      switch (data.kind) {
        case SeqKind::List:
          w.add('[');
          write_items(w, data.items, depth);
          w.add(']');
          return;
        case SeqKind::Tuple:
          w.add('(');
          write_items(w, data.items, depth);
          if (data.items.size() == 1) w.add(',');
          w.add(')');
          return;
        case SeqKind::DictKeys:
        case SeqKind::DictValues:
        case SeqKind::DictItems:
          w.add(type_name(v));
          w.add("([");
          write_items(w, data.items, depth);
          w.add("])");
          return;
        case SeqKind::Range:
          w.add(str_cat("range(", data.range[0], ", ", data.range[1]));
          if (data.range[2] != 1) w.add(str_cat(", ", data.range[2]));
          w.add(')');
          return;
      }
      return;
    }
    case Type::Dict: {
      w.add('{');
      bool first = true;
      for (const auto& [key, value] : v.dict().entries()) {
        if (!first) w.add(", ");
        first = false;
        write_repr(w, key, depth + 1);
        w.add(": ");
        write_repr(w, value, depth + 1);
      }
      w.add('}');
      return;
    }
    case Type::Object:
      w.add(v.object()->repr());
      return;
    default:
      w.add(to_str(v, SIZE_MAX));
  }
}

}  // namespace

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::stoi(std::string(sci.substr(e + 1)));
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt));
      out += '.';
      out += digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+',
                exponent < 0 ? -exponent : exponent);
  out += exp_buf;
  return out;
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out += quote;
  for (char32_t c : unicode::decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      append_hex(out, "\\x", c, 2);
    } else if (c < 0x80 || unicode::is_printable(c)) {
      unicode::append_utf8(out, c);
    } else if (c < 0x100) {
      append_hex(out, "\\x", c, 2);
    } else if (c < 0x10000) {
      append_hex(out, "\\u", c, 4);
    } else {
      append_hex(out, "\\U", c, 8);
    }
  }
  out += quote;
  return out;
}

std::string to_str(const Value& v, size_t max_bytes) {
  switch (v.type()) {
    case Type::Undefined:
      return "";
    case Type::None:
      return "None";
    case Type::Bool:
      return v.as_bool() ? "True" : "False";
    case Type::Int:
      return std::to_string(v.as_int());
    case Type::Float:
      return float_repr(v.as_float());
    case Type::String:
      return v.str();
    default:
      return to_repr(v, max_bytes);
  }
}

std::string to_repr(const Value& v, size_t max_bytes) {
  BoundedText w(max_bytes, "printed value");
  write_repr(w, v, 0);
  return w.take();
}

void check_print_depth(int depth, const char* why) {
  if (depth > kMaxPrintDepth) runtime_fail("value nested too deeply ", why);
}

void BoundedText::add(std::string_view s) {
  if (out_.size() + s.size() > max_) limit_fail(what_, " larger than ", max_, " bytes");
  out_.append(s);
}

void append_hex(std::string& out, const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*x", digits, value);
  out += prefix;
  out += buf;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace deepinfer::tokenizer::jinja
