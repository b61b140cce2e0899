// str.format() through jinja2's SandboxedFormatter: {} / {0} / {name} fields with .attr and
// [key] accessors, !s / !r conversions and the common format specs.
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/method_args.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

bool is_digits(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;  // longer numbers are treated as names
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// format(value, spec) for [[fill]align][sign][0][width][.precision][type].
std::string apply_spec(const Value& v, std::string_view spec, size_t max_size) {
  if (spec.empty()) return to_str(v, max_size);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  const std::u32string cps = unicode::decode(spec);
  if (cps.size() >= 2 && cps[1] < 0x80 && is_align(static_cast<char>(cps[1]))) {
    fill.clear();
    unicode::append_utf8(fill, cps[0]);
    align = static_cast<char>(cps[1]);
    i = fill.size() + 1;
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  std::string sign;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  int width = 0, precision = -1;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
    width = width * 10 + (spec[i++] - '0');
    if (width > 100000) limit_fail("format width too large");
  }
  if (i < spec.size() && spec[i] == '.') {
    precision = 0;
    ++i;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      precision = precision * 10 + (spec[i++] - '0');
      if (precision > 1000) limit_fail("format precision too large");
    }
  }
  const char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size()) unsupported("format spec '", std::string(spec), "'");
  std::string body;
  if (v.is_string() && (type == 0 || type == 's')) {
    if (!sign.empty() || align == '=') runtime_fail("Sign not allowed in string format specifier");
    body = v.str();
    if (precision >= 0) {
      const std::u32string s = unicode::decode(body);
      if (s.size() > static_cast<size_t>(precision))
        body = unicode::encode(std::u32string_view(s).substr(0, static_cast<size_t>(precision)));
    }
    if (!align) align = '<';
  } else if (v.is_number() && !v.is_bool()) {
    char buf[1200];
    const std::string flags = sign == "-" ? "" : sign;
    if (type == 0 && precision < 0) {
      body = to_str(v, max_size);
      if (!sign.empty() && sign != "-" && body[0] != '-') body = sign + body;
    } else if ((type == 'd' || (type == 0 && v.is_int())) && v.is_integral()) {
      std::snprintf(buf, sizeof buf, ("%" + flags + "lld").c_str(),
                    static_cast<long long>(v.as_int()));
      body = buf;
    } else if (std::string("fFeEgG%").find(type ? type : 'g') != std::string::npos) {
      const char t = type == '%' ? 'f' : type ? type : 'g';
      const double x = type == '%' ? v.as_float() * 100 : v.as_float();
      std::snprintf(buf, sizeof buf,
                    ("%" + flags + "." + std::to_string(precision < 0 ? 6 : precision) + t).c_str(),
                    x);
      body = buf;
      if (type == '%') body += '%';
    } else {
      unsupported("format spec '", std::string(spec), "' for ", type_name(v));
    }
    if (!align) align = '>';
  } else {
    unsupported("format spec '", std::string(spec), "' for ", type_name(v));
  }
  const auto len = static_cast<int>(unicode::length(body));
  if (len >= width) return body;
  const int pad = width - len;
  auto repeat = [&](int n) {
    std::string out;
    for (int k = 0; k < n; ++k) out += fill;
    return out;
  };
  switch (align) {
    case '<':
      return body + repeat(pad);
    case '^':
      return repeat(pad / 2) + body + repeat(pad - pad / 2);
    case '=': {
      const size_t at =
          (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
      return body.substr(0, at) + repeat(pad) + body.substr(at);
    }
    default:
      return repeat(pad) + body;
  }
}

}  // namespace

Value str_format_method(Interpreter& in, const Value& self, CallArgs& args) {
  const std::string& fmt = self.str();
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  size_t i = 0;
  while (i < fmt.size()) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      runtime_fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) runtime_fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos)
      unsupported("nested replacement fields in str.format");
    i = close + 1;
    std::string spec, conversion;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    size_t end = field.find_first_of(".[");
    const std::string head = field.substr(0, end);
    Value v;
    if (head.empty() || is_digits(head)) {
      size_t index;
      if (head.empty()) {
        used_auto = true;
        index = auto_index++;
      } else {
        used_manual = true;
        index = std::stoul(head);
      }
      if (used_auto && used_manual) {
        runtime_fail(
            "cannot switch between automatic field numbering and manual field specification");
      }
      if (index >= args.positional.size())
        runtime_fail("Replacement index ", index, " out of range for positional args tuple");
      v = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [k, val] : args.keyword) {
        if (k == head) {
          v = val;
          found = true;
        }
      }
      if (!found) runtime_fail("KeyError: '", head, "'");
    }
    while (end != std::string::npos && end < field.size()) {
      if (field[end] == '.') {
        const size_t next = field.find_first_of(".[", end + 1);
        v = in.getattr(v, field.substr(end + 1, next == std::string::npos ? std::string::npos
                                                                          : next - end - 1));
        end = next;
      } else {
        const size_t rb = field.find(']', end);
        if (rb == std::string::npos) runtime_fail("Missing ']' in format string");
        const std::string key = field.substr(end + 1, rb - end - 1);
        v = in.getitem(v, is_digits(key) ? Value::integer(std::stoll(key)) : Value::string(key));
        end = rb + 1;
      }
    }
    if (conversion == "r") {
      v = Value::string(to_repr(v, in.max_size()));
    } else if (conversion == "s") {
      v = Value::string(to_str(v, in.max_size()));
    } else if (!conversion.empty()) {
      unsupported("str.format conversion '!", conversion, "'");
    }
    out += apply_spec(v, spec, in.max_size());
    if (out.size() > in.max_size()) limit_fail("string larger than ", in.max_size(), " bytes");
  }
  return Value::string(std::move(out));
}

}  // namespace deepinfer::tokenizer::jinja
