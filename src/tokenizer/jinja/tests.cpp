// jinja2's tests (`x is defined`, `x is string`, ...), from jinja2 tests.py.
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/method_args.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/registry.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

const Value& one_arg(CallArgs& a, const char* test) {
  auto b = a.bind(test, {"other"});
  if (!b[0]) runtime_fail(test, "() missing 1 required positional argument");
  a.positional = {*b[0]};
  return a.positional[0];
}

void no_args(CallArgs& a, const char* test) {
  a.bind(test, {});
}

bool t_defined(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "defined");
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "undefined");
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "none");
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "boolean");
  return v.is_bool();
}
bool t_true(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "true");
  return v.is_bool() && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "false");
  return v.is_bool() && !v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "integer");
  return v.is_int();
}
bool t_float(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "float");
  return v.is_float();
}
bool t_number(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "number");
  return v.is_number();
}
bool t_string(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "string");
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "mapping");
  return v.is_dict();
}
bool t_escaped(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "escaped");
  return v.is_markup();
}

bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "sequence");
  // len() and __getitem__ both exist (Undefined defines both).
  if (v.is_list()) {
    const SeqKind k = v.list_data().kind;
    return k == SeqKind::List || k == SeqKind::Tuple || k == SeqKind::Range;
  }
  return v.is_string() || v.is_dict() || v.is_undefined();
}

bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "iterable");
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() ||
         (v.is_object() && v.object()->iterable());
}

bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "callable");
  return v.is_undefined() || (v.is_object() && v.object()->callable());
}

bool str_case(const Value& v, bool want_lower) {
  bool cased = false;
  for (char32_t c : unicode::decode(v.is_string() ? v.str() : to_str(v, SIZE_MAX))) {
    const bool lower = unicode::is_lower(c), upper = unicode::is_upper(c);
    const bool title = unicode::is_cased(c) && !lower && !upper;
    if (title || (want_lower ? upper : lower)) return false;
    if (want_lower ? lower : upper) cased = true;
  }
  return cased;
}
bool t_lower(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  return str_case(v, true);
}
bool t_upper(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  return str_case(v, false);
}

bool mod_equals(const Value& v, int64_t divisor, int64_t remainder) {
  return python_equal(binary_op(BinOp::Mod, v, Value::integer(divisor), SIZE_MAX),
                      Value::integer(remainder));
}
bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return mod_equals(v, 2, 1);
}
bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return mod_equals(v, 2, 0);
}

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  auto b = a.bind("divisibleby", {"num"});
  if (!b[0]) runtime_fail("divisibleby() missing 1 required positional argument: 'num'");
  return python_equal(binary_op(BinOp::Mod, v, *b[0], SIZE_MAX), Value::integer(0));
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Eq, v, one_arg(a, "eq"));
}
bool t_ne(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Ne, v, one_arg(a, "ne"));
}
bool t_lt(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Lt, v, one_arg(a, "lt"));
}
bool t_le(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Le, v, one_arg(a, "le"));
}
bool t_gt(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Gt, v, one_arg(a, "gt"));
}
bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Ge, v, one_arg(a, "ge"));
}
bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  return contains(one_arg(a, "in"), v);
}

bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& other = one_arg(a, "sameas");
  if (v.type() != other.type()) return false;
  switch (v.type()) {
    case Type::None:
    case Type::Undefined:
      return v.is_none();  // None is a singleton; each Undefined is a new object
    case Type::Bool:
      return v.as_bool() == other.as_bool();
    case Type::Int:
      // CPython caches small integers
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Type::String:
      return &v.str() == &other.str();
    case Type::List:
      return &v.list_data() == &other.list_data();
    case Type::Dict:
      return &v.dict() == &other.dict();
    case Type::Object:
      return v.object() == other.object();
    default:
      return false;
  }
}

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  return v.is_string() && find_test(v.str()) != nullptr;
}

const TestEntry kTests[] = {
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"filter", t_filter},
    {"test", t_test},
    {"none", t_none},
    {"boolean", t_boolean},
    {"false", t_false},
    {"true", t_true},
    {"integer", t_integer},
    {"float", t_float},
    {"lower", t_lower},
    {"upper", t_upper},
    {"string", t_string},
    {"mapping", t_mapping},
    {"number", t_number},
    {"sequence", t_sequence},
    {"iterable", t_iterable},
    {"callable", t_callable},
    {"sameas", t_sameas},
    {"escaped", t_escaped},
    {"in", t_in},
    {"==", t_eq},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"!=", t_ne},
    {"ne", t_ne},
    {">", t_gt},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"<", t_lt},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<=", t_le},
    {"le", t_le},
};

}  // namespace

std::span<const TestEntry> all_tests() {
  return kTests;
}

}  // namespace deepinfer::tokenizer::jinja
