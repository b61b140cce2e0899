// Expression evaluation.
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/objects.h"
#include "tokenizer/jinja/pyformat.h"

namespace deepinfer::tokenizer::jinja {

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  DepthGuard guard(*this);
  try {
    charge(1);
    if (e.fold && !folding_) {
      if (auto v = try_fold(e, scope, true)) return *v;
    }
    return eval_inner(e, scope);
  } catch (const Failure& f) {
    rethrow_at(e.offset, f);
  }
}

CallArgs Interpreter::eval_args(const Expr& e, const ScopePtr& scope, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
  for (const auto& [name, expr] : e.kwargs) {
    for (const auto& [existing, unused] : args.keyword) {
      if (existing == name) runtime_fail("got multiple values for keyword argument '", name, "'");
    }
    args.keyword.emplace_back(name, eval(*expr, scope));
  }
  return args;
}

Value Interpreter::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::Const:
      return e.value;
    case ExprKind::Name: {
      if (folding_) throw Impossible{};
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      ValueList items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::list(std::move(items),
                         e.kind == ExprKind::List ? SeqKind::List : SeqKind::Tuple);
    }
    case ExprKind::Dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i], scope);
        if (!hashable(key)) runtime_fail("unhashable type: '", type_name(key), "'");
        d.set(std::move(key), eval(*e.args[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::Getattr:
      return getattr(eval(*e.args[0], scope), e.name);
    case ExprKind::Getitem: {
      const Value obj = eval(*e.args[0], scope);
      if (e.args[1]->kind == ExprKind::Slice) return eval_slice(obj, *e.args[1], scope);
      return getitem(obj, eval(*e.args[1], scope));
    }
    case ExprKind::Slice:
      unsupported("slice objects outside of a subscript");
    case ExprKind::Call: {
      if (folding_) throw Impossible{};
      const Value callee = eval(*e.args[0], scope);
      Value result = call(callee, eval_args(e, scope, 1));
      charge_value(result);
      return result;
    }
    case ExprKind::Filter:
      return eval_filter(e, scope, nullptr);
    case ExprKind::Test: {
      const Value input = eval(*e.args[0], scope);
      if (!e.test) {
        if (jinja_knows_test(e.name)) unsupported("test '", e.name, "' is not supported");
        runtime_fail("no test named '", e.name, "'");
      }
      CallArgs args = eval_args(e, scope, 1);
      return Value::boolean(e.test(*this, input, args));
    }
    case ExprKind::Neg:
      return negate(eval(*e.args[0], scope));
    case ExprKind::Pos:
      return positive(eval(*e.args[0], scope));
    case ExprKind::Not:
      return Value::boolean(!eval(*e.args[0], scope).truthy());
    case ExprKind::Binary: {
      const Value a = eval(*e.args[0], scope);
      const Value b = eval(*e.args[1], scope);
      Value result = binary_op(e.op, a, b, limits_.max_string_bytes, limits_.max_list_items);
      charge_value(result);
      return result;
    }
    case ExprKind::And: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? eval(*e.args[1], scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? a : eval(*e.args[1], scope);
    }
    case ExprKind::Compare:
      return eval_compare(e, scope);
    case ExprKind::Concat: {
      std::string out;
      for (const auto& a : e.args) {
        const Value v = eval(*a, scope);
        out += v.is_string() ? v.str() : to_str(v, limits_.max_string_bytes);
        if (out.size() > limits_.max_string_bytes) {
          limit_fail("string larger than ", limits_.max_string_bytes, " bytes");
        }
      }
      Value result = Value::string(std::move(out));
      charge_value(result);
      return result;
    }
    case ExprKind::CondExpr: {
      if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

namespace {

// jinja2's has_safe_repr: values its optimizer may bake into the compiled template.
bool safe_repr(const Value& v) {
  switch (v.type()) {
    case Type::None:
    case Type::Bool:
    case Type::Int:
    case Type::Float:
    case Type::String:
      return true;
    case Type::List: {
      const SeqKind k = v.list_data().kind;
      if (k != SeqKind::List && k != SeqKind::Tuple && k != SeqKind::Range) return false;
      for (const Value& item : v.items()) {
        if (!safe_repr(item)) return false;
      }
      return true;
    }
    case Type::Dict:
      for (const auto& [key, item] : v.dict().entries()) {
        if (!safe_repr(key) || !safe_repr(item)) return false;
      }
      return true;
    default:
      return false;
  }
}

}  // namespace

// jinja2 evaluates constant expressions at compile time: its optimizer replaces constant
// subexpressions whose value it can write back as a literal, and each {{ }} whose value is
// constant is printed at compile time. Those evaluations run a slice through the sandbox's
// getitem, where a failing slice gives Undefined instead of raising as the compiled code
// would. Expressions marked `fold` (constant, containing a slice) are therefore first tried
// in folding mode; any failure falls back to the normal evaluation, as in jinja2.
std::optional<Value> Interpreter::try_fold(const Expr& e, const ScopePtr& scope,
                                           bool need_safe_repr) {
  folding_ = true;
  try {
    Value v = eval_inner(e, scope);
    folding_ = false;
    if (!need_safe_repr || safe_repr(v)) return v;
    return std::nullopt;
  } catch (const Impossible&) {
  } catch (const TemplateError&) {
  } catch (const Failure&) {
  }
  folding_ = false;
  return std::nullopt;
}

Value Interpreter::eval_output(const Expr& e, const ScopePtr& scope) {
  if (e.fold) {
    if (auto v = try_fold(e, scope, false)) return *v;
  }
  return eval(e, scope);
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  // a < b < c  is  a < b and b < c, evaluating b once.
  Value left = eval(*e.args[0], scope);
  for (size_t i = 0; i < e.cmp_ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], scope);
    if (!compare(e.cmp_ops[i], left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input) {
  Value input;
  if (!e.args[0]) {
    if (!block_input) runtime_fail("filter without input");
    input = *block_input;
  } else if (block_input && e.args[0]->kind == ExprKind::Filter) {
    input = eval_filter(*e.args[0], scope, block_input);  // a {% filter a|b %} chain
  } else {
    input = eval(*e.args[0], scope);
  }
  if (!e.filter) {
    if (folding_) throw Impossible{};
    if (jinja_knows_filter(e.name)) unsupported("filter '", e.name, "' is not supported");
    runtime_fail("no filter named '", e.name, "'");
  }
  if (folding_ && (e.name == "map" || e.name == "select" || e.name == "reject" ||
                   e.name == "selectattr" || e.name == "rejectattr")) {
    throw Impossible{};  // filters that take the template context are never folded
  }
  CallArgs args = eval_args(e, scope, 1);
  Value result = e.filter(*this, input, args);
  charge_value(result);
  return result;
}

Value Interpreter::apply_filter_chain(const Expr& chain, const ScopePtr& scope,
                                      const Value& input) {
  try {
    return eval_filter(chain, scope, &input);
  } catch (const Failure& f) {
    rethrow_at(chain.offset, f);
  }
}

Value Interpreter::call(const Value& callee, CallArgs args) {
  if (callee.is_undefined()) undefined_fail(callee);
  Object* o = callee.object();
  if (!o || !o->callable()) runtime_fail("'", type_name(callee), "' object is not callable");
  return o->call(*this, std::move(args.positional), std::move(args.keyword));
}

Value Interpreter::call_filter(const std::string& name, const Value& input, CallArgs args) {
  FilterFn fn = find_filter(name);
  if (!fn) {
    if (jinja_knows_filter(name)) unsupported("filter '", name, "' is not supported");
    runtime_fail("no filter named '", name, "'");
  }
  return fn(*this, input, args);
}

bool Interpreter::call_test(const std::string& name, const Value& input, CallArgs args) {
  TestFn fn = find_test(name);
  if (!fn) {
    if (jinja_knows_test(name)) unsupported("test '", name, "' is not supported");
    runtime_fail("no test named '", name, "'");
  }
  return fn(*this, input, args);
}

}  // namespace deepinfer::tokenizer::jinja
