// Scalar and string filters (jinja2 filters.py), with transformers' tojson.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/method_args.h"
#include "tokenizer/jinja/number_parse.h"
#include "tokenizer/jinja/objects.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/pystr.h"
#include "tokenizer/jinja/registry.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

// jinja2's soft_str: str() unless already a string (Markup stays Markup).
Value soft_str(Interpreter& in, const Value& v) {
  if (v.is_string()) return v;
  return Value::string(to_str(v, in.max_size()));
}

Value f_tojson(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = b[0] && b[0]->truthy();
  // json.dumps encodes a top-level string without ever looking at indent.
  if (b[1] && !b[1]->is_none() && !input.is_string()) {
    if (b[1]->is_string()) {
      o.indent = b[1]->str();
    } else if (b[1]->is_integral()) {
      o.indent = std::string(
          static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(b[1]->as_int(), 1000))), ' ');
    } else {
      runtime_fail("tojson: indent must be an int or a string, not ", type_name(*b[1]));
    }
  }
  if (b[2] && !b[2]->is_none()) {
    const ValueList seps = in.iterate(*b[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      runtime_fail("tojson: separators must be a pair of strings");
    }
    o.item_sep = seps[0].str();
    o.key_sep = seps[1].str();
  }
  o.sort_keys = b[3] && b[3]->truthy();
  return Value::string(to_json(input, o, in.max_size()));
}

Value f_trim(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("trim", {"chars"});
  const Value s = soft_str(in, input);
  return Value::string(pystr::strip(s.str(), opt_str(b[0], "trim"), true, true), s.is_markup());
}

template <std::string (*F)(std::string_view)>
Value f_case(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("filter", {});
  const Value s = soft_str(in, input);
  return Value::string(F(s.str()), s.is_markup());
}

bool title_separator(char32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
}

Value f_title(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("title", {});
  const Value s = soft_str(in, input);
  const std::u32string cps = unicode::decode(s.str());
  std::string out;
  size_t i = 0;
  while (i < cps.size()) {
    const bool sep = title_separator(cps[i]);
    size_t j = i;
    while (j < cps.size() && title_separator(cps[j]) == sep) ++j;
    std::string first;
    unicode::append_utf8(first, cps[i]);
    out += unicode::upper(first);
    out += unicode::lower(unicode::encode(std::u32string_view(cps).substr(i + 1, j - i - 1)));
    i = j;
  }
  return Value::string(std::move(out), s.is_markup());
}

Value f_default(Interpreter&, const Value& input, CallArgs& a) {
  auto b = a.bind("default", {"default_value", "boolean"});
  const bool boolean = b[1] && b[1]->truthy();
  if (input.is_undefined() || (boolean && !input.truthy())) return b[0] ? *b[0] : Value::string("");
  return input;
}

Value f_length(Interpreter&, const Value& input, CallArgs& a) {
  a.bind("length", {});
  return Value::integer(python_len(input));
}

Value f_string(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("string", {});
  return soft_str(in, input);
}

Value f_safe(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("safe", {});
  return Value::string(input.is_string() ? input.str() : to_str(input, in.max_size()), true);
}

Value f_escape(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("escape", {});
  if (input.is_markup()) return input;
  return Value::string(html_escape(to_str(input, in.max_size())), true);
}

Value f_forceescape(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("forceescape", {});
  return Value::string(html_escape(to_str(input, in.max_size())), true);
}

Value f_replace(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("replace", {"old", "new", "count"});
  if (!b[0] || !b[1]) runtime_fail("replace() missing required arguments");
  const int64_t count = (b[2] && !b[2]->is_none()) ? opt_int(b[2], "replace", -1) : -1;
  return Value::string(pystr::replace(to_str(input, in.max_size()), to_str(*b[0], in.max_size()),
                                      to_str(*b[1], in.max_size()), count, in.max_size()));
}

Value f_center(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("center", {"width"});
  const Value s = soft_str(in, input);
  return Value::string(pystr::pad(s.str(), opt_int(b[0], "center", 80), " ", 'c', in.max_size()),
                       s.is_markup());
}

Value f_indent(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("indent", {"width", "first", "blank"});
  if (input.is_undefined()) undefined_fail(input);
  if (!input.is_string())
    runtime_fail("indent: unsupported operand type(s) for +=: '", type_name(input), "' and 'str'");
  std::string indention;
  if (b[0] && b[0]->is_string()) {
    indention = b[0]->str();
  } else {
    const int64_t width = opt_int(b[0], "indent", 4);
    if (width > 100000) limit_fail("indent width too large");
    indention.assign(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  }
  const bool first = b[1] && b[1]->truthy();
  const bool blank = b[2] && b[2]->truthy();
  const std::vector<std::string> lines = pystr::splitlines(input.str() + "\n", false);
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      rv += '\n';
      if (blank || !lines[i].empty()) rv += indention;
    }
    rv += lines[i];
    if (rv.size() > in.max_size()) limit_fail("string larger than ", in.max_size(), " bytes");
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv), input.is_markup());
}

Value f_truncate(Interpreter&, const Value& input, CallArgs& a) {
  auto b = a.bind("truncate", {"length", "killwords", "end", "leeway"});
  const int64_t length = opt_int(b[0], "truncate", 255);
  const bool killwords = b[1] && b[1]->truthy();
  const std::string end = b[2] ? req_str(b[2], "truncate") : "...";
  const int64_t leeway = (b[3] && !b[3]->is_none()) ? opt_int(b[3], "truncate", 5) : 5;
  const auto end_len = static_cast<int64_t>(unicode::length(end));
  if (length < end_len) runtime_fail("expected length >= ", end_len, ", got ", length);
  if (leeway < 0) runtime_fail("expected leeway >= 0, got ", leeway);
  if (!input.is_string()) {
    // Any sized value short enough comes back unchanged; cutting one fails in Python too.
    if (python_len(input) <= length + leeway) return input;
    runtime_fail("truncate: '", type_name(input), "' object has no attribute 'rsplit'");
  }
  const std::u32string s = unicode::decode(input.str());
  if (static_cast<int64_t>(s.size()) <= length + leeway) return input;
  std::string head =
      unicode::encode(std::u32string_view(s).substr(0, static_cast<size_t>(length - end_len)));
  if (!killwords) head = pystr::rsplit(head, std::string(" "), 1)[0];
  return Value::string(head + end);
}

Value f_wordcount(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("wordcount", {});
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : unicode::decode(soft_str(in, input).str())) {
    const bool w = unicode::is_word(c);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

Value f_int(Interpreter&, const Value& input, CallArgs& a) {
  auto b = a.bind("int", {"default", "base"});
  const Value fallback = b[0] ? *b[0] : Value::integer(0);
  const int64_t base = opt_int(b[1], "int", 10);
  if (input.is_undefined()) undefined_fail(input);
  if (input.is_string()) {
    if (auto v = parse_python_int(input.str(), base)) return Value::integer(*v);
    if (auto f = parse_python_float(input.str())) {
      if (std::isnan(*f)) return fallback;
      if (std::isinf(*f)) runtime_fail("cannot convert float infinity to integer");
      if (std::fabs(*f) >= 9.2e18) unsupported("integer beyond 64 bits");
      return Value::integer(static_cast<int64_t>(*f));
    }
    return fallback;
  }
  if (input.is_integral()) return Value::integer(input.as_int());
  if (input.is_float()) {
    const double f = input.as_float();
    if (std::isnan(f)) return fallback;
    if (std::isinf(f)) runtime_fail("cannot convert float infinity to integer");
    if (std::fabs(f) >= 9.2e18) unsupported("integer beyond 64 bits");
    return Value::integer(static_cast<int64_t>(f));
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& input, CallArgs& a) {
  auto b = a.bind("float", {"default"});
  const Value fallback = b[0] ? *b[0] : Value::number(0.0);
  if (input.is_undefined()) undefined_fail(input);
  if (input.is_number()) return Value::number(input.as_float());
  if (input.is_string()) {
    if (auto f = parse_python_float(input.str())) return Value::number(*f);
  }
  return fallback;
}

Value f_round(Interpreter&, const Value& input, CallArgs& a) {
  auto b = a.bind("round", {"precision", "method"});
  const int64_t precision = opt_int(b[0], "round", 0);
  const std::string method = b[1] ? req_str(b[1], "round") : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    runtime_fail("method must be common, ceil or floor");
  }
  if (!input.is_number())
    runtime_fail("type ", type_name(input), " doesn't define __round__ method");
  if (precision < 0 || precision > 300) unsupported("round() with precision ", precision);
  const double x = input.as_float();
  if (method != "common") {
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value::number((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
  }
  if (input.is_integral()) return Value::integer(input.as_int());
  if (!std::isfinite(x)) return input;
  // printf rounds the exact binary value half-to-even, as Python's round() does.
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
  return Value::number(std::strtod(buf, nullptr));
}

Value f_abs(Interpreter&, const Value& input, CallArgs& a) {
  a.bind("abs", {});
  if (input.is_float()) return Value::number(std::fabs(input.as_float()));
  if (input.is_integral()) {
    if (input.as_int() == INT64_MIN) unsupported("integer beyond 64 bits");
    return Value::integer(std::llabs(input.as_int()));
  }
  runtime_fail("bad operand type for abs(): '", type_name(input), "'");
}

Value f_format(Interpreter& in, const Value& input, CallArgs& a) {
  if (!a.positional.empty() && !a.keyword.empty()) {
    runtime_fail("can't handle positional and keyword arguments at the same time");
  }
  const Value s = soft_str(in, input);
  Value args;
  if (!a.keyword.empty()) {
    Dict d;
    for (auto& [k, v] : a.keyword) d.set(Value::string(k), v);
    args = Value::dict(std::move(d));
  } else {
    args = Value::list(a.positional, SeqKind::Tuple);
  }
  return binary_op(BinOp::Mod, s, args, in.max_size(), in.max_items());
}

Value f_attr(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("attr", {"name"});
  const std::string name = req_str(b[0], "attr");
  if (input.is_undefined()) undefined_fail(input);
  if (input.is_object()) return in.getattr(input, name);
  if (auto method = builtin_method(input, name)) return *method;
  return Value::undefined("'" + type_name(input) + " object' has no attribute '" + name + "'");
}

const FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_case<unicode::capitalize>},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"e", f_escape},
    {"escape", f_escape},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"length", f_length},
    {"lower", f_case<unicode::lower>},
    {"replace", f_replace},
    {"round", f_round},
    {"safe", f_safe},
    {"string", f_string},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"upper", f_case<unicode::upper>},
    {"wordcount", f_wordcount},
};

}  // namespace

std::span<const FilterEntry> string_filters() {
  return kFilters;
}

}  // namespace deepinfer::tokenizer::jinja
