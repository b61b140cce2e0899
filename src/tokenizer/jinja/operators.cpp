#include "tokenizer/jinja/operators.h"

#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pyformat.h"

namespace deepinfer::tokenizer::jinja {

namespace {

[[noreturn]] void operand_error(BinOp op, const Value& a, const Value& b) {
  runtime_fail("unsupported operand type(s) for ", binop_symbol(op), ": '", type_name(a), "' and '",
               type_name(b), "'");
}

[[noreturn]] void overflow() {
  unsupported("integer result beyond 64 bits (Python would use a big integer)");
}

void check_size(size_t n, size_t max_size) {
  if (n > max_size) limit_fail("value larger than the limit of ", max_size);
}

bool is_plain_sequence(const Value& v) {
  return v.is_list() &&
         (v.list_data().kind == SeqKind::List || v.list_data().kind == SeqKind::Tuple);
}

Value repeat(const Value& seq, int64_t times, size_t max_size, size_t max_items) {
  if (times <= 0) {
    return seq.is_string() ? Value::string("", seq.is_markup())
                           : Value::list({}, seq.list_data().kind);
  }
  const auto n = static_cast<uint64_t>(times);
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && n > max_size / s.size()) limit_fail("string larger than ", max_size);
    std::string out;
    out.reserve(s.size() * n);
    for (uint64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out), seq.is_markup());
  }
  const ValueList& items = seq.items();
  if (!items.empty() && n > max_items / items.size())
    limit_fail("list longer than ", max_items, " items");
  ValueList out;
  out.reserve(items.size() * n);
  for (uint64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.list_data().kind);
}

double float_floordiv(double a, double b) {
  // CPython's float_floor_div, so results match to the last bit.
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) div -= 1.0;
  }
  if (div != 0.0) {
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return floordiv;
  }
  return std::copysign(0.0, a / b);
}

double float_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

Value add(const Value& a, const Value& b, size_t max_size, size_t max_items) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return Value::number(a.as_float() + b.as_float());
    int64_t r;
    if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
    return Value::integer(r);
  }
  if (a.is_string() && b.is_string()) {
    check_size(a.str().size() + b.str().size(), max_size);
    // markupsafe: adding to a Markup string escapes the plain operand.
    if (a.is_markup() && !b.is_markup()) return Value::string(a.str() + html_escape(b.str()), true);
    if (b.is_markup() && !a.is_markup()) return Value::string(html_escape(a.str()) + b.str(), true);
    return Value::string(a.str() + b.str(), a.is_markup());
  }
  if (is_plain_sequence(a) && is_plain_sequence(b) && a.list_data().kind == b.list_data().kind) {
    check_size(a.items().size() + b.items().size(), max_items);
    ValueList out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.list_data().kind);
  }
  operand_error(BinOp::Add, a, b);
}

Value arithmetic(BinOp op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) operand_error(op, a, b);
  const bool floats = a.is_float() || b.is_float();
  if (op == BinOp::Div) {
    if (b.as_float() == 0.0) runtime_fail("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (floats) {
    const double x = a.as_float(), y = b.as_float();
    switch (op) {
      case BinOp::Sub:
        return Value::number(x - y);
      case BinOp::Mul:
        return Value::number(x * y);
      case BinOp::FloorDiv:
        if (y == 0.0) runtime_fail("float floor division by zero");
        return Value::number(float_floordiv(x, y));
      case BinOp::Mod:
        if (y == 0.0) runtime_fail("float modulo");
        return Value::number(float_mod(x, y));
      case BinOp::Pow: {
        if (x == 0.0 && y < 0) runtime_fail("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) unsupported("complex results of **");
        const double r = std::pow(x, y);
        if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
          runtime_fail("(34, 'Numerical result out of range')");  // Python's OverflowError
        }
        return Value::number(r);
      }
      default:
        break;
    }
    operand_error(op, a, b);
  }
  const int64_t x = a.as_int(), y = b.as_int();
  int64_t r = 0;
  switch (op) {
    case BinOp::Sub:
      if (__builtin_sub_overflow(x, y, &r)) overflow();
      return Value::integer(r);
    case BinOp::Mul:
      if (__builtin_mul_overflow(x, y, &r)) overflow();
      return Value::integer(r);
    case BinOp::FloorDiv:
    case BinOp::Mod: {
      if (y == 0) runtime_fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q -= 1;
        m += y;
      }
      return Value::integer(op == BinOp::FloorDiv ? q : m);
    }
    case BinOp::Pow: {
      if (y < 0) {
        if (x == 0) runtime_fail("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      int64_t result = 1, base = x, e = y;
      while (e > 0) {
        if (e & 1) {
          if (__builtin_mul_overflow(result, base, &result)) overflow();
        }
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value::integer(result);
    }
    default:
      break;
  }
  operand_error(op, a, b);
}

}  // namespace

const char* binop_symbol(BinOp op) {
  switch (op) {
    case BinOp::Add:
      return "+";
    case BinOp::Sub:
      return "-";
    case BinOp::Mul:
      return "*";
    case BinOp::Div:
      return "/";
    case BinOp::FloorDiv:
      return "//";
    case BinOp::Mod:
      return "%";
    case BinOp::Pow:
      return "**";
  }
  return "?";
}

void undefined_fail(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  runtime_fail(hint.empty() ? std::string("undefined value used") : hint);
}

Value binary_op(BinOp op, const Value& a, const Value& b, size_t max_size, size_t max_items) {
  if (a.is_undefined()) undefined_fail(a);
  // str % x formats any x (an Undefined argument prints as ""); other operators hand an
  // Undefined right operand its reflected method, which raises.
  if (b.is_undefined() && !(op == BinOp::Mod && a.is_string())) undefined_fail(b);
  switch (op) {
    case BinOp::Add:
      return add(a, b, max_size, max_items);
    case BinOp::Mul:
      if ((a.is_string() || is_plain_sequence(a)) && b.is_integral()) {
        return repeat(a, b.as_int(), max_size, max_items);
      }
      if (a.is_integral() && (b.is_string() || is_plain_sequence(b))) {
        return repeat(b, a.as_int(), max_size, max_items);
      }
      return arithmetic(op, a, b);
    case BinOp::Mod:
      if (a.is_string()) {
        if (a.is_markup()) unsupported("% formatting of a safe (Markup) string");
        return Value::string(percent_format(a.str(), b, max_size));
      }
      return arithmetic(op, a, b);
    default:
      return arithmetic(op, a, b);
  }
}

Value negate(const Value& v) {
  if (v.is_undefined()) undefined_fail(v);
  if (v.is_float()) return Value::number(-v.as_float());
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) overflow();
    return Value::integer(-v.as_int());
  }
  runtime_fail("bad operand type for unary -: '", type_name(v), "'");
}

Value positive(const Value& v) {
  if (v.is_undefined()) undefined_fail(v);
  if (v.is_float()) return v;
  if (v.is_integral()) return Value::integer(v.as_int());
  runtime_fail("bad operand type for unary +: '", type_name(v), "'");
}

bool python_less(const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_fail(a);
  if (b.is_undefined()) undefined_fail(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (is_plain_sequence(a) && is_plain_sequence(b) && a.list_data().kind == b.list_data().kind) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!python_equal(x[i], y[i])) return python_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  runtime_fail("'<' not supported between instances of '", type_name(a), "' and '", type_name(b),
               "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Type::Undefined:
      return false;  // iterating an undefined value yields nothing
    case Type::String:
      if (!item.is_string()) {
        runtime_fail("'in <string>' requires string as left operand, not ", type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Type::List:
      for (const Value& v : container.items()) {
        if (python_equal(v, item)) return true;
      }
      return false;
    case Type::Dict:
      if (!hashable(item)) runtime_fail("unhashable type: '", type_name(item), "'");
      return container.dict().find(item) != nullptr;
    case Type::Object: {
      Object* o = container.object();
      if (o->iterable()) {
        Value v;
        while (o->next(v)) {
          if (python_equal(v, item)) return true;
        }
        return false;
      }
      break;
    }
    default:
      break;
  }
  runtime_fail("argument of type '", type_name(container), "' is not iterable");
}

bool compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq:
      return python_equal(a, b);
    case CmpOp::Ne:
      return !python_equal(a, b);
    case CmpOp::Lt:
      return python_less(a, b);
    case CmpOp::Gt:
      return python_less(b, a);
    case CmpOp::Le:
      return python_less(a, b) || python_equal(a, b);
    case CmpOp::Ge:
      return python_less(b, a) || python_equal(a, b);
    case CmpOp::In:
      return contains(b, a);
    case CmpOp::NotIn:
      return !contains(b, a);
  }
  return false;
}

}  // namespace deepinfer::tokenizer::jinja
