#include "tokenizer/jinja/objects.h"

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pyformat.h"

namespace deepinfer::tokenizer::jinja {

// ---- Namespace -------------------------------------------------------------------------

Value Namespace::get_attr(const std::string& name) {
  if (!name.empty() && name[0] == '_') {
    return Value::undefined("access to attribute '" + name + "' of 'Namespace' object is unsafe.");
  }
  if (const Value* v = attrs_.find(std::string_view(name))) return *v;
  return Value::undefined("'Namespace object' has no attribute '" + name + "'");
}

std::string Namespace::repr() const {
  // Python's dict repr prints a dict it is already printing as {...}.
  thread_local std::vector<const Namespace*> in_progress;
  for (const Namespace* ns : in_progress) {
    if (ns == this) return "<Namespace {...}>";
  }
  in_progress.push_back(this);
  try {
    std::string text = "<Namespace " + to_repr(Value::dict(attrs_), SIZE_MAX) + ">";
    in_progress.pop_back();
    return text;
  } catch (...) {
    in_progress.pop_back();
    throw;
  }
}

void Namespace::set(const std::string& name, Value value) {
  if (!name.empty() && name[0] == '_') {
    runtime_fail(
        "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '",
        name, "'. Please rename the attribute.");
  }
  attrs_.set(Value::string(name), std::move(value));
}

// ---- LoopObject ------------------------------------------------------------------------

namespace {

bool holds_object(const Value& v) {
  if (v.is_object()) return true;
  if (v.is_list()) {
    for (const Value& item : v.items()) {
      if (holds_object(item)) return true;
    }
  }
  if (v.is_dict()) {
    for (const auto& [k, item] : v.dict().entries()) {
      if (holds_object(k) || holds_object(item)) return true;
    }
  }
  return false;
}

}  // namespace

Value LoopObject::get_attr(const std::string& name) {
  const auto n = static_cast<int64_t>(items_->size());
  const auto i = static_cast<int64_t>(index0_);
  if (name == "index0") return Value::integer(i);
  if (name == "index") return Value::integer(i + 1);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem") {
    return i > 0 ? (*items_)[index0_ - 1] : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? (*items_)[index0_ + 1] : Value::undefined("there is no next item");
  }
  if (name == "cycle") {
    auto self = shared_from_this();
    return Value::object(std::make_shared<NativeCallable>(
        "cycle", "method",
        [self](Interpreter&, CallArgs& args) -> Value {
          if (!args.keyword.empty()) runtime_fail("cycle() takes no keyword arguments");
          if (args.positional.empty()) runtime_fail("no items for cycling given");
          return args.positional[self->index0_ % args.positional.size()];
        },
        capture_depth(Value::object(self))));
  }
  if (name == "changed") {
    auto self = shared_from_this();
    return Value::object(std::make_shared<NativeCallable>(
        "changed", "method",
        [self](Interpreter&, CallArgs& args) -> Value {
          const ValueList& now = args.positional;
          // The loop keeps these values; objects among them could chain loops together.
          for (const Value& v : now) {
            if (holds_object(v)) unsupported("loop.changed() with objects (namespace, loop, ...)");
          }
          auto& last = *self->last_changed_;
          bool same = last.has_value() && last->size() == now.size();
          for (size_t k = 0; same && k < now.size(); ++k) same = python_equal((*last)[k], now[k]);
          if (same) return Value::boolean(false);
          last = now;
          return Value::boolean(true);
        },
        capture_depth(Value::object(self))));
  }
  return Object::get_attr(name);
}

std::string LoopObject::repr() const {
  return str_cat("<LoopContext ", index0_ + 1, "/", items_->size(), ">");
}

// ---- MacroObject -----------------------------------------------------------------------

Value MacroObject::call(Interpreter& in, ValueList args,
                        std::vector<std::pair<std::string, Value>> kwargs) {
  CallArgs call_args{std::move(args), std::move(kwargs)};
  return in.call_macro(*stmt_, closure_, std::move(call_args));
}

std::string MacroObject::repr() const {
  return "<Macro " + string_repr(stmt_->name) + ">";
}

// ---- NativeCallable / Generator --------------------------------------------------------

Value NativeCallable::call(Interpreter& in, ValueList args,
                           std::vector<std::pair<std::string, Value>> kwargs) {
  CallArgs call_args{std::move(args), std::move(kwargs)};
  return fn_(in, call_args);
}

bool Generator::next(Value& out) {
  if (done_) return false;
  if (next_(out)) return true;
  done_ = true;
  next_ = nullptr;  // drop what the generator captured
  return false;
}

}  // namespace deepinfer::tokenizer::jinja
