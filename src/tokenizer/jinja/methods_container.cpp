// dict / list / tuple / range methods and the argument coercions methods share.
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/method_args.h"
#include "tokenizer/jinja/objects.h"

namespace deepinfer::tokenizer::jinja {

std::optional<std::string> opt_str(const std::optional<Value>& v, const char* fn) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) runtime_fail(fn, "() argument must be str or None, not ", type_name(*v));
  return v->str();
}

std::string req_str(const std::optional<Value>& v, const char* fn) {
  if (!v) runtime_fail(fn, "() missing a required argument");
  if (!v->is_string()) runtime_fail(fn, "() argument must be str, not ", type_name(*v));
  return v->str();
}

int64_t opt_int(const std::optional<Value>& v, const char* fn, int64_t fallback) {
  if (!v) return fallback;
  if (!v->is_integral()) {
    runtime_fail("'", type_name(*v), "' object cannot be interpreted as an integer (", fn, ")");
  }
  return v->as_int();
}

int64_t req_int(const std::optional<Value>& v, const char* fn) {
  if (!v) runtime_fail(fn, "() missing a required argument");
  return opt_int(v, fn, 0);
}

std::optional<int64_t> opt_index(const std::optional<Value>& v, const char* fn) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_integral()) {
    runtime_fail("slice indices must be integers or None or have an __index__ method (", fn, ")");
  }
  return v->as_int();
}

namespace {

using Fn = std::function<Value(Interpreter&, CallArgs&)>;

// A bound method of `self` (which the callable keeps).
Value method(const char* name, const Value& self, Fn fn) {
  return Value::object(std::make_shared<NativeCallable>(name, "builtin_function_or_method",
                                                        std::move(fn), capture_depth(self)));
}

Value unsafe(const std::string& name, const Value& self) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(self) +
                          "' object is unsafe.");
}

bool one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  if (name == "get") {
    return method("get", self, [self](Interpreter&, CallArgs& args) -> Value {
      auto b = args.bind("get", {"key", "default"});
      if (!b[0]) runtime_fail("get expected at least 1 argument, got 0");
      if (!hashable(*b[0])) runtime_fail("unhashable type: '", type_name(*b[0]), "'");
      if (const Value* v = self.dict().find(*b[0])) return *v;
      return b[1] ? *b[1] : Value::none();
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    return method(name.c_str(), self, [self, name](Interpreter&, CallArgs& args) -> Value {
      args.bind(name, {});
      ValueList out;
      out.reserve(self.dict().size());
      for (const auto& [k, v] : self.dict().entries()) {
        if (name == "items") {
          out.push_back(Value::list({k, v}, SeqKind::Tuple));
        } else {
          out.push_back(name == "keys" ? k : v);
        }
      }
      const SeqKind kind = name == "items"  ? SeqKind::DictItems
                           : name == "keys" ? SeqKind::DictKeys
                                            : SeqKind::DictValues;
      return Value::list(std::move(out), kind);
    });
  }
  if (name == "copy") {
    return method("copy", self, [self](Interpreter&, CallArgs& args) -> Value {
      args.bind("copy", {});
      return self;
    });
  }
  if (one_of(name, {"clear", "pop", "popitem", "setdefault", "update"})) return unsafe(name, self);
  if (name == "fromkeys") {
    return method("fromkeys", Value(), [](Interpreter&, CallArgs&) -> Value {
      unsupported("dict.fromkeys() is not supported");
    });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  const SeqKind kind = self.list_data().kind;
  const bool sequence = kind == SeqKind::List || kind == SeqKind::Tuple || kind == SeqKind::Range;
  if (kind == SeqKind::Range) {
    if (name == "start") return Value::integer(self.list_data().range[0]);
    if (name == "stop") return Value::integer(self.list_data().range[1]);
    if (name == "step") return Value::integer(self.list_data().range[2]);
  }
  if (sequence && name == "count") {
    return method("count", self, [self](Interpreter&, CallArgs& args) -> Value {
      auto b = args.bind("count", {"value"});
      if (!b[0]) runtime_fail("count() takes exactly one argument (0 given)");
      int64_t n = 0;
      for (const Value& v : self.items()) n += python_equal(v, *b[0]) ? 1 : 0;
      return Value::integer(n);
    });
  }
  if (sequence && name == "index") {
    return method("index", self, [self](Interpreter&, CallArgs& args) -> Value {
      auto b = args.bind("index", {"value", "start", "stop"});
      if (!b[0]) runtime_fail("index expected at least 1 argument, got 0");
      const auto n = static_cast<int64_t>(self.items().size());
      int64_t lo = opt_index(b[1], "index").value_or(0);
      int64_t hi = opt_index(b[2], "index").value_or(n);
      if (lo < 0) lo = std::max<int64_t>(lo + n, 0);
      if (hi < 0) hi = std::max<int64_t>(hi + n, 0);
      for (int64_t i = lo; i < hi && i < n; ++i) {
        if (python_equal(self.items()[static_cast<size_t>(i)], *b[0])) return Value::integer(i);
      }
      runtime_fail("value is not in list");
    });
  }
  if (kind == SeqKind::List) {
    if (name == "copy") {
      return method("copy", self, [self](Interpreter&, CallArgs& args) -> Value {
        args.bind("copy", {});
        return self;
      });
    }
    if (one_of(name, {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"})) {
      return unsafe(name, self);
    }
  }
  return std::nullopt;
}

}  // namespace deepinfer::tokenizer::jinja
