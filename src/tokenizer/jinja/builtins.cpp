// Argument binding and jinja2's default globals (range, dict, namespace, ...).
#include "tokenizer/jinja/builtins.h"

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/objects.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

// jinja2.sandbox.MAX_RANGE
constexpr int64_t kMaxRange = 100000;

Value builtin_range(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) runtime_fail("range() takes no keyword arguments");
  const ValueList& p = args.positional;
  if (p.empty() || p.size() > 3) runtime_fail("range expected 1 to 3 arguments, got ", p.size());
  for (const Value& v : p) {
    if (!v.is_integral()) {
      runtime_fail("'", type_name(v), "' object cannot be interpreted as an integer");
    }
  }
  const int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  const int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) runtime_fail("range() arg 3 must not be zero");
  // Item count in 128 bits so extreme bounds cannot overflow.
  const __int128 span = static_cast<__int128>(stop) - start;
  __int128 count = 0;
  if (step > 0 && span > 0) count = (span - 1) / step + 1;
  if (step < 0 && span < 0) count = (-span - 1) / -static_cast<__int128>(step) + 1;
  if (count > kMaxRange) {
    limit_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange, ").");
  }
  ValueList items;
  items.reserve(static_cast<size_t>(count));
  for (__int128 k = 0; k < count; ++k) {
    items.push_back(Value::integer(static_cast<int64_t>(start + k * step)));
  }
  in.charge(static_cast<int64_t>(items.size()));
  return Value::range(std::move(items), start, stop, step);
}

// dict(*args, **kwargs) as Python builds it.
Dict build_dict(Interpreter& in, CallArgs& args, const char* what) {
  if (args.positional.size() > 1) {
    runtime_fail(what, " expected at most 1 argument, got ", args.positional.size());
  }
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      for (const Value& pair : in.iterate(src)) {
        const ValueList kv = in.iterate(pair);
        if (kv.size() != 2)
          runtime_fail(what, ": dictionary update sequence element has length ", kv.size(),
                       "; 2 is required");
        if (!hashable(kv[0])) runtime_fail("unhashable type: '", type_name(kv[0]), "'");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) d.set(Value::string(k), v);
  return d;
}

Value builtin_dict(Interpreter& in, CallArgs& args) {
  return Value::dict(build_dict(in, args, "dict"));
}

Value builtin_namespace(Interpreter& in, CallArgs& args) {
  Dict attrs = build_dict(in, args, "namespace");
  for (const auto& [k, v] : attrs.entries()) {
    if (k.is_string() && !k.str().empty() && k.str()[0] == '_') {
      runtime_fail(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '",
          k.str(), "'. Please rename the attribute.");
    }
  }
  return in.make_namespace(std::move(attrs));
}

Value not_supported(Interpreter&, CallArgs&) {
  unsupported("cycler(), joiner() and lipsum() are not supported");
}

}  // namespace

std::vector<std::optional<Value>> CallArgs::bind(
    std::string_view function, std::initializer_list<std::string_view> names) const {
  std::vector<std::optional<Value>> out(names.size());
  if (positional.size() > names.size()) {
    runtime_fail(function, "() takes at most ", names.size(), " argument(s) (", positional.size(),
                 " given)");
  }
  for (size_t i = 0; i < positional.size(); ++i) out[i] = positional[i];
  for (const auto& [key, value] : keyword) {
    size_t index = 0;
    bool found = false;
    for (auto name : names) {
      if (name == key) {
        found = true;
        break;
      }
      ++index;
    }
    if (!found) runtime_fail(function, "() got an unexpected keyword argument '", key, "'");
    if (out[index]) runtime_fail(function, "() got multiple values for argument '", key, "'");
    out[index] = value;
  }
  return out;
}

Value native_function(std::string name, NativeFn fn) {
  return Value::object(std::make_shared<NativeCallable>(
      std::move(name), "builtin_function_or_method",
      [fn](Interpreter& in, CallArgs& args) { return fn(in, args); }));
}

void add_default_globals(Dict& globals) {
  globals.set(Value::string("range"), native_function("range", builtin_range));
  globals.set(Value::string("dict"), native_function("dict", builtin_dict));
  globals.set(Value::string("namespace"), native_function("namespace", builtin_namespace));
  globals.set(Value::string("cycler"), native_function("cycler", not_supported));
  globals.set(Value::string("joiner"), native_function("joiner", not_supported));
  globals.set(Value::string("lipsum"), native_function("lipsum", not_supported));
}

int64_t python_len(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
      return 0;
    case Type::String:
      return static_cast<int64_t>(unicode::length(v.str()));
    case Type::List:
      return static_cast<int64_t>(v.items().size());
    case Type::Dict:
      return static_cast<int64_t>(v.dict().size());
    default:
      runtime_fail("object of type '", type_name(v), "' has no len()");
  }
}

}  // namespace deepinfer::tokenizer::jinja
