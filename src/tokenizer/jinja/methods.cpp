// Methods of str, dict and list values (what `s.strip()` or `d.items()` call), as Python
// implements them; mutating methods are refused like jinja2's ImmutableSandboxedEnvironment.
#include <cstring>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/method_args.h"
#include "tokenizer/jinja/objects.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/pystr.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

using MethodFn = Value (*)(Interpreter&, const Value& self, CallArgs&);

struct MethodEntry {
  const char* name;
  MethodFn fn;  // null: Python has it but it is not supported here
};

Value str_list(const std::vector<std::string>& parts, bool markup) {
  ValueList out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(Value::string(p, markup));
  return Value::list(std::move(out));
}

Value m_strip_impl(const Value& self, CallArgs& a, const char* fn, bool left, bool right) {
  auto b = a.bind(fn, {"chars"});
  return Value::string(pystr::strip(self.str(), opt_str(b[0], fn), left, right), self.is_markup());
}
Value m_strip(Interpreter&, const Value& s, CallArgs& a) {
  return m_strip_impl(s, a, "strip", true, true);
}
Value m_lstrip(Interpreter&, const Value& s, CallArgs& a) {
  return m_strip_impl(s, a, "lstrip", true, false);
}
Value m_rstrip(Interpreter&, const Value& s, CallArgs& a) {
  return m_strip_impl(s, a, "rstrip", false, true);
}

Value m_split_impl(const Value& self, CallArgs& a, bool reverse) {
  const char* fn = reverse ? "rsplit" : "split";
  auto b = a.bind(fn, {"sep", "maxsplit"});
  const auto sep = opt_str(b[0], fn);
  const int64_t maxsplit = opt_int(b[1], fn, -1);
  return str_list(
      reverse ? pystr::rsplit(self.str(), sep, maxsplit) : pystr::split(self.str(), sep, maxsplit),
      self.is_markup());
}
Value m_split(Interpreter&, const Value& s, CallArgs& a) {
  return m_split_impl(s, a, false);
}
Value m_rsplit(Interpreter&, const Value& s, CallArgs& a) {
  return m_split_impl(s, a, true);
}

Value m_splitlines(Interpreter&, const Value& s, CallArgs& a) {
  auto b = a.bind("splitlines", {"keepends"});
  return str_list(pystr::splitlines(s.str(), opt_int(b[0], "splitlines", 0) != 0), s.is_markup());
}

Value affix_test(const Value& self, CallArgs& a, const char* fn, bool at_end) {
  auto b = a.bind(fn, {"prefix", "start", "end"});
  if (!b[0]) runtime_fail(fn, "() takes at least 1 argument (0 given)");
  const auto start = opt_index(b[1], fn);
  const auto end = opt_index(b[2], fn);
  auto test = [&](const Value& affix) {
    if (!affix.is_string()) {
      runtime_fail(fn, " first arg must be str or a tuple of str, not ", type_name(affix));
    }
    return pystr::starts_with(self.str(), affix.str(), start, end, at_end);
  };
  if (b[0]->is_sequence_kind(SeqKind::Tuple)) {
    for (const Value& v : b[0]->items()) {
      if (test(v)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  return Value::boolean(test(*b[0]));
}
Value m_startswith(Interpreter&, const Value& s, CallArgs& a) {
  return affix_test(s, a, "startswith", false);
}
Value m_endswith(Interpreter&, const Value& s, CallArgs& a) {
  return affix_test(s, a, "endswith", true);
}

Value find_impl(const Value& self, CallArgs& a, const char* fn, bool reverse, bool must_find) {
  auto b = a.bind(fn, {"sub", "start", "end"});
  const std::string needle = req_str(b[0], fn);
  const int64_t at =
      pystr::find(self.str(), needle, opt_index(b[1], fn), opt_index(b[2], fn), reverse);
  if (at < 0 && must_find) runtime_fail("substring not found");
  return Value::integer(at);
}
Value m_find(Interpreter&, const Value& s, CallArgs& a) {
  return find_impl(s, a, "find", false, false);
}
Value m_rfind(Interpreter&, const Value& s, CallArgs& a) {
  return find_impl(s, a, "rfind", true, false);
}
Value m_index(Interpreter&, const Value& s, CallArgs& a) {
  return find_impl(s, a, "index", false, true);
}
Value m_rindex(Interpreter&, const Value& s, CallArgs& a) {
  return find_impl(s, a, "rindex", true, true);
}

Value m_count(Interpreter&, const Value& s, CallArgs& a) {
  auto b = a.bind("count", {"sub", "start", "end"});
  return Value::integer(pystr::count(s.str(), req_str(b[0], "count"), opt_index(b[1], "count"),
                                     opt_index(b[2], "count")));
}

Value m_replace(Interpreter& in, const Value& s, CallArgs& a) {
  auto b = a.bind("replace", {"old", "new", "count"});
  return Value::string(pystr::replace(s.str(), req_str(b[0], "replace"), req_str(b[1], "replace"),
                                      opt_int(b[2], "replace", -1), in.max_size()),
                       s.is_markup());
}

using CaseFn = std::string (*)(std::string_view);
template <CaseFn F>
Value m_case(Interpreter&, const Value& s, CallArgs& a) {
  a.bind("method", {});
  return Value::string(F(s.str()), s.is_markup());
}

template <bool (*Pred)(char32_t)>
Value m_is_all(Interpreter&, const Value& s, CallArgs& a) {
  a.bind("method", {});
  const std::u32string cps = unicode::decode(s.str());
  if (cps.empty()) return Value::boolean(false);
  for (char32_t c : cps) {
    if (!Pred(c)) return Value::boolean(false);
  }
  return Value::boolean(true);
}

bool is_alnum(char32_t c) {
  return unicode::is_alpha(c) || unicode::is_decimal(c) || unicode::is_digit(c) ||
         unicode::is_numeric(c);
}

Value m_case_test(const Value& s, CallArgs& a, bool want_lower) {
  a.bind(want_lower ? "islower" : "isupper", {});
  bool cased = false;
  for (char32_t c : unicode::decode(s.str())) {
    const bool lower = unicode::is_lower(c), upper = unicode::is_upper(c);
    const bool title = unicode::is_cased(c) && !lower && !upper;
    if (title || (want_lower ? upper : lower)) return Value::boolean(false);
    if (want_lower ? lower : upper) cased = true;
  }
  return Value::boolean(cased);
}
Value m_islower(Interpreter&, const Value& s, CallArgs& a) {
  return m_case_test(s, a, true);
}
Value m_isupper(Interpreter&, const Value& s, CallArgs& a) {
  return m_case_test(s, a, false);
}

Value m_istitle(Interpreter&, const Value& s, CallArgs& a) {
  a.bind("istitle", {});
  return Value::boolean(pystr::is_title(s.str()));
}

Value m_isascii(Interpreter&, const Value& s, CallArgs& a) {
  a.bind("isascii", {});
  return Value::boolean(unicode::is_ascii(s.str()));
}

Value pad_impl(Interpreter& in, const Value& s, CallArgs& a, const char* fn, char align) {
  auto b = a.bind(fn, {"width", "fillchar"});
  const int64_t width = req_int(b[0], fn);
  const std::string fill = b[1] ? req_str(b[1], fn) : " ";
  return Value::string(pystr::pad(s.str(), width, fill, align, in.max_size()), s.is_markup());
}
Value m_center(Interpreter& in, const Value& s, CallArgs& a) {
  return pad_impl(in, s, a, "center", 'c');
}
Value m_ljust(Interpreter& in, const Value& s, CallArgs& a) {
  return pad_impl(in, s, a, "ljust", 'l');
}
Value m_rjust(Interpreter& in, const Value& s, CallArgs& a) {
  return pad_impl(in, s, a, "rjust", 'r');
}

Value m_zfill(Interpreter& in, const Value& s, CallArgs& a) {
  auto b = a.bind("zfill", {"width"});
  return Value::string(pystr::zfill(s.str(), req_int(b[0], "zfill"), in.max_size()), s.is_markup());
}

Value m_join(Interpreter& in, const Value& s, CallArgs& a) {
  auto b = a.bind("join", {"iterable"});
  if (!b[0]) runtime_fail("join() takes exactly one argument (0 given)");
  std::string out;
  bool first = true;
  for (const Value& v : in.iterate(*b[0])) {
    if (!v.is_string())
      runtime_fail("sequence item: expected str instance, ", type_name(v), " found");
    if (!first) out += s.str();
    first = false;
    out += v.str();
    if (out.size() > in.max_size()) limit_fail("string larger than ", in.max_size(), " bytes");
  }
  return Value::string(std::move(out), s.is_markup());
}

Value partition_impl(const Value& s, CallArgs& a, bool reverse) {
  const char* fn = reverse ? "rpartition" : "partition";
  auto b = a.bind(fn, {"sep"});
  const std::string sep = req_str(b[0], fn);
  if (sep.empty()) runtime_fail("empty separator");
  const std::string& text = s.str();
  const size_t k = reverse ? text.rfind(sep) : text.find(sep);
  ValueList parts;
  if (k == std::string::npos) {
    parts = reverse ? ValueList{Value::string(""), Value::string(""), Value::string(text)}
                    : ValueList{Value::string(text), Value::string(""), Value::string("")};
  } else {
    parts = {Value::string(text.substr(0, k)), Value::string(sep),
             Value::string(text.substr(k + sep.size()))};
  }
  return Value::list(std::move(parts), SeqKind::Tuple);
}
Value m_partition(Interpreter&, const Value& s, CallArgs& a) {
  return partition_impl(s, a, false);
}
Value m_rpartition(Interpreter&, const Value& s, CallArgs& a) {
  return partition_impl(s, a, true);
}

Value affix_remove(const Value& s, CallArgs& a, bool suffix) {
  const char* fn = suffix ? "removesuffix" : "removeprefix";
  auto b = a.bind(fn, {"affix"});
  const std::string affix = req_str(b[0], fn);
  const std::string& text = s.str();
  if (!suffix && text.compare(0, affix.size(), affix) == 0)
    return Value::string(text.substr(affix.size()), s.is_markup());
  if (suffix && !affix.empty() && text.size() >= affix.size() &&
      text.compare(text.size() - affix.size(), affix.size(), affix) == 0) {
    return Value::string(text.substr(0, text.size() - affix.size()), s.is_markup());
  }
  return s;
}
Value m_removeprefix(Interpreter&, const Value& s, CallArgs& a) {
  return affix_remove(s, a, false);
}
Value m_removesuffix(Interpreter&, const Value& s, CallArgs& a) {
  return affix_remove(s, a, true);
}

const MethodEntry kStrMethods[] = {
    {"capitalize", m_case<unicode::capitalize>},
    {"casefold", m_case<unicode::casefold>},
    {"center", m_center},
    {"count", m_count},
    {"encode", nullptr},
    {"endswith", m_endswith},
    {"expandtabs", nullptr},
    {"find", m_find},
    {"format", str_format_method},
    {"format_map", nullptr},
    {"index", m_index},
    {"isalnum", m_is_all<is_alnum>},
    {"isalpha", m_is_all<unicode::is_alpha>},
    {"isascii", m_isascii},
    {"isdecimal", m_is_all<unicode::is_decimal>},
    {"isdigit", m_is_all<unicode::is_digit>},
    {"isidentifier", nullptr},
    {"islower", m_islower},
    {"isnumeric", m_is_all<unicode::is_numeric>},
    {"isprintable", nullptr},
    {"isspace", m_is_all<unicode::is_space>},
    {"istitle", m_istitle},
    {"isupper", m_isupper},
    {"join", m_join},
    {"ljust", m_ljust},
    {"lower", m_case<unicode::lower>},
    {"lstrip", m_lstrip},
    {"maketrans", nullptr},
    {"partition", m_partition},
    {"removeprefix", m_removeprefix},
    {"removesuffix", m_removesuffix},
    {"replace", m_replace},
    {"rfind", m_rfind},
    {"rindex", m_rindex},
    {"rjust", m_rjust},
    {"rpartition", m_rpartition},
    {"rsplit", m_rsplit},
    {"rstrip", m_rstrip},
    {"split", m_split},
    {"splitlines", m_splitlines},
    {"startswith", m_startswith},
    {"strip", m_strip},
    {"swapcase", m_case<unicode::swapcase>},
    {"title", m_case<unicode::title>},
    {"translate", nullptr},
    {"upper", m_case<unicode::upper>},
    {"zfill", m_zfill},
};

}  // namespace

namespace {

// markupsafe's Markup escapes some arguments of its str methods: replace's new text, the
// fill character of center / ljust / rjust and every item of join.
Value escaped(Interpreter& in, const Value& v) {
  if (v.is_markup()) return v;
  return Value::string(html_escape(v.is_string() ? v.str() : to_str(v, in.max_size())), true);
}

void markup_arguments(Interpreter& in, std::string_view name, CallArgs& args) {
  if (name == "format" || name == "format_map") unsupported("Markup.", name, "()");
  if ((name == "replace" || name == "center" || name == "ljust" || name == "rjust") &&
      args.positional.size() >= 2 && args.positional[1].is_string()) {
    args.positional[1] = escaped(in, args.positional[1]);
  }
  if (name == "join" && !args.positional.empty()) {
    ValueList items;
    for (const Value& v : in.iterate(args.positional[0])) items.push_back(escaped(in, v));
    args.positional[0] = Value::list(std::move(items));
  }
}

}  // namespace

Value bind_method(const Value& self, const char* name, MethodFn fn) {
  if (!fn) {
    return Value::object(std::make_shared<NativeCallable>(
        name, "builtin_function_or_method", [name](Interpreter&, CallArgs&) -> Value {
          unsupported("the str method '", name, "' is not supported");
        }));
  }
  const uint32_t depth = capture_depth(self);
  return Value::object(std::make_shared<NativeCallable>(
      name, "builtin_function_or_method",
      [self, fn, name](Interpreter& in, CallArgs& args) -> Value {
        if (self.is_markup()) markup_arguments(in, name, args);
        Value result = fn(in, self, args);
        // markupsafe wraps these results back into Markup
        if (self.is_markup() && result.is_sequence_kind(SeqKind::Tuple)) {
          ValueList parts;
          for (const Value& v : result.items()) parts.push_back(Value::string(v.str(), true));
          return Value::list(std::move(parts), SeqKind::Tuple);
        }
        return result;
      },
      depth));
}

std::optional<Value> builtin_method(const Value& self, const std::string& name) {
  if (self.is_string()) {
    for (const auto& m : kStrMethods) {
      if (name == m.name) return bind_method(self, m.name, m.fn);
    }
    return std::nullopt;
  }
  if (self.is_dict()) return dict_method(self, name);
  if (self.is_list()) return list_method(self, name);
  return std::nullopt;
}

}  // namespace deepinfer::tokenizer::jinja
