// Expression parsing (jinja2 parser.py: parse_expression down to parse_primary), with the
// same precedence: condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary,
// where filters, tests and calls bind to the unary operand.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser_impl.h"

namespace deepinfer::tokenizer::jinja {

ExprPtr Parser::make(ExprKind kind, size_t offset, std::vector<ExprPtr> args) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->offset = offset;
  int depth = 0;
  for (const auto& a : args) {
    if (a) depth = std::max(depth, a->depth);
  }
  e->depth = depth + 1;
  if (e->depth > max_depth_) {
    fail("expression nested deeper than the limit of " + std::to_string(max_depth_) + " levels",
         offset, ErrorKind::Limit);
  }
  e->args = std::move(args);
  return e;
}

ExprPtr Parser::make_const(Value v, size_t offset) {
  auto e = make(ExprKind::Const, offset);
  e->value = std::move(v);
  return e;
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = cur();
  if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd) return true;
  if (t.type == TokenType::Operator && t.text == ")") return true;
  if (t.type == TokenType::Name) {
    for (auto name : extra_end) {
      if (t.text == name) return true;
    }
  }
  return false;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  Nest nest(*this);
  const size_t offset = cur().offset;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    ExprPtr test = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
    std::vector<ExprPtr> args;
    args.push_back(std::move(test));
    args.push_back(std::move(expr1));
    args.push_back(std::move(otherwise));
    expr1 = make(ExprKind::CondExpr, offset, std::move(args));
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const size_t offset = cur().offset;
    advance();
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_and());
    left = make(ExprKind::Or, offset, std::move(args));
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const size_t offset = cur().offset;
    advance();
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_not());
    left = make(ExprKind::And, offset, std::move(args));
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    Nest nest(*this);
    const size_t offset = cur().offset;
    advance();
    std::vector<ExprPtr> args;
    args.push_back(parse_not());
    return make(ExprKind::Not, offset, std::move(args));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const size_t offset = cur().offset;
  ExprPtr first = parse_math1();
  std::vector<ExprPtr> args;
  std::vector<CmpOp> ops;
  while (true) {
    const Token& t = cur();
    CmpOp op;
    if (t.type == TokenType::Operator && t.text == "==") {
      op = CmpOp::Eq;
    } else if (t.type == TokenType::Operator && t.text == "!=") {
      op = CmpOp::Ne;
    } else if (t.type == TokenType::Operator && t.text == "<") {
      op = CmpOp::Lt;
    } else if (t.type == TokenType::Operator && t.text == "<=") {
      op = CmpOp::Le;
    } else if (t.type == TokenType::Operator && t.text == ">") {
      op = CmpOp::Gt;
    } else if (t.type == TokenType::Operator && t.text == ">=") {
      op = CmpOp::Ge;
    } else if (is_name("in")) {
      op = CmpOp::In;
    } else if (is_name("not") && look().type == TokenType::Name && look().text == "in") {
      advance();
      op = CmpOp::NotIn;
    } else {
      break;
    }
    advance();
    if (args.empty()) args.push_back(std::move(first));
    args.push_back(parse_math1());
    ops.push_back(op);
  }
  if (ops.empty()) return first;
  ExprPtr e = make(ExprKind::Compare, offset, std::move(args));
  e->cmp_ops = std::move(ops);
  return e;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const size_t offset = cur().offset;
    const BinOp op = is_op("+") ? BinOp::Add : BinOp::Sub;
    advance();
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_concat());
    left = make(ExprKind::Binary, offset, std::move(args));
    left->op = op;
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const size_t offset = cur().offset;
  std::vector<ExprPtr> args;
  args.push_back(parse_math2());
  while (skip_op("~")) args.push_back(parse_math2());
  if (args.size() == 1) return std::move(args[0]);
  return make(ExprKind::Concat, offset, std::move(args));
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const size_t offset = cur().offset;
    const std::string& t = cur().text;
    const BinOp op = t == "*"    ? BinOp::Mul
                     : t == "/"  ? BinOp::Div
                     : t == "//" ? BinOp::FloorDiv
                                 : BinOp::Mod;
    advance();
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_pow());
    left = make(ExprKind::Binary, offset, std::move(args));
    left->op = op;
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary();
  while (is_op("**")) {
    const size_t offset = cur().offset;
    advance();
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_unary());
    left = make(ExprKind::Binary, offset, std::move(args));
    left->op = BinOp::Pow;
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Nest nest(*this);
  const size_t offset = cur().offset;
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const ExprKind kind = is_op("-") ? ExprKind::Neg : ExprKind::Pos;
    advance();
    std::vector<ExprPtr> args;
    args.push_back(parse_unary(false));
    node = make(kind, offset, std::move(args));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const size_t offset = t.offset;
  switch (t.type) {
    case TokenType::Name: {
      const std::string name = t.text;
      advance();
      if (name == "true" || name == "True") return make_const(Value::boolean(true), offset);
      if (name == "false" || name == "False") return make_const(Value::boolean(false), offset);
      if (name == "none" || name == "None") return make_const(Value::none(), offset);
      for (auto& reads : macro_reads_) {
        if (name == "varargs") reads.first = true;
        if (name == "kwargs") reads.second = true;
      }
      ExprPtr e = make(ExprKind::Name, offset);
      e->name = name;
      return e;
    }
    case TokenType::String: {
      std::string text;
      while (cur().type == TokenType::String) {
        text += cur().text;
        advance();
      }
      return make_const(Value::string(std::move(text)), offset);
    }
    case TokenType::Integer: {
      advance();
      return make_const(Value::integer(t.int_value), offset);
    }
    case TokenType::Float: {
      advance();
      return make_const(Value::number(t.float_value), offset);
    }
    case TokenType::Operator:
      if (t.text == "(") {
        advance();
        ExprPtr e = parse_tuple(true, {}, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  fail_here("unexpected " + describe(t));
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                            bool explicit_parentheses) {
  const size_t offset = cur().offset;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    args.push_back(parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parentheses) fail_here("expected an expression, got " + describe(cur()));
  }
  return make(ExprKind::Tuple, offset, std::move(args));
}

ExprPtr Parser::parse_list() {
  const size_t offset = cur().offset;
  expect_op("[");
  std::vector<ExprPtr> items;
  while (!is_op("]")) {
    if (!items.empty()) expect_op(",");
    if (is_op("]")) break;
    items.push_back(parse_expression());
  }
  expect_op("]");
  return make(ExprKind::List, offset, std::move(items));
}

ExprPtr Parser::parse_dict() {
  const size_t offset = cur().offset;
  expect_op("{");
  std::vector<ExprPtr> items;
  while (!is_op("}")) {
    if (!items.empty()) expect_op(",");
    if (is_op("}")) break;
    items.push_back(parse_expression());
    expect_op(":");
    items.push_back(parse_expression());
  }
  expect_op("}");
  return make(ExprKind::Dict, offset, std::move(items));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const size_t offset = cur().offset;
  if (skip_op(".")) {
    const Token& attr = cur();
    if (attr.type == TokenType::Name) {
      std::vector<ExprPtr> args;
      args.push_back(std::move(node));
      ExprPtr e = make(ExprKind::Getattr, offset, std::move(args));
      e->name = attr.text;
      advance();
      return e;
    }
    if (attr.type != TokenType::Integer) fail_here("expected name or number");
    std::vector<ExprPtr> args;
    args.push_back(std::move(node));
    args.push_back(make_const(Value::integer(attr.int_value), attr.offset));
    advance();
    return make(ExprKind::Getitem, offset, std::move(args));
  }
  expect_op("[");
  std::vector<ExprPtr> subs;
  while (!is_op("]")) {
    if (!subs.empty()) expect_op(",");
    subs.push_back(parse_subscribed());
  }
  expect_op("]");
  std::vector<ExprPtr> args;
  args.push_back(std::move(node));
  if (subs.size() == 1) {
    args.push_back(std::move(subs[0]));
  } else {
    args.push_back(make(ExprKind::Tuple, offset, std::move(subs)));
  }
  return make(ExprKind::Getitem, offset, std::move(args));
}

ExprPtr Parser::parse_subscribed() {
  const size_t offset = cur().offset;
  std::vector<ExprPtr> parts;
  if (skip_op(":")) {
    parts.push_back(nullptr);
  } else {
    ExprPtr node = parse_expression();
    if (!skip_op(":")) return node;
    parts.push_back(std::move(node));
  }
  if (is_op(":")) {
    parts.push_back(nullptr);
  } else if (!is_op("]") && !is_op(",")) {
    parts.push_back(parse_expression());
  } else {
    parts.push_back(nullptr);
  }
  if (skip_op(":")) {
    parts.push_back((!is_op("]") && !is_op(",")) ? parse_expression() : nullptr);
  } else {
    parts.push_back(nullptr);
  }
  return make(ExprKind::Slice, offset, std::move(parts));
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  bool require_comma = false;
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) {
      fail("*args / **kwargs in calls are not supported", cur().offset, ErrorKind::Unsupported);
    }
    if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "=") {
      std::string key = cur().text;
      advance();
      advance();
      ExprPtr value = parse_expression();
      call.depth = std::max(call.depth, value->depth + 1);
      call.kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!call.kwargs.empty()) fail_here("invalid syntax for function call expression");
      ExprPtr value = parse_expression();
      call.depth = std::max(call.depth, value->depth + 1);
      call.args.push_back(std::move(value));
    }
    require_comma = true;
  }
  expect_op(")");
  if (call.depth > max_depth_) fail("expression nested too deeply", call.offset, ErrorKind::Limit);
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  const size_t offset = cur().offset;
  std::vector<ExprPtr> args;
  args.push_back(std::move(callee));
  ExprPtr call = make(ExprKind::Call, offset, std::move(args));
  parse_call_args(*call);
  return call;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    const size_t offset = cur().offset;
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    std::vector<ExprPtr> args;
    args.push_back(std::move(node));
    ExprPtr f = make(ExprKind::Filter, offset, std::move(args));
    f->name = name;
    f->filter = find_filter(name);
    if (is_op("(")) parse_call_args(*f);
    node = std::move(f);
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const size_t offset = cur().offset;
  advance();  // is
  const bool negated = skip_name("not");
  std::string name = expect_name();
  while (skip_op(".")) name += "." + expect_name();
  std::vector<ExprPtr> args;
  args.push_back(std::move(node));
  ExprPtr test = make(ExprKind::Test, offset, std::move(args));
  test->name = name;
  test->test = find_test(name);
  const Token& t = cur();
  if (is_op("(")) {
    parse_call_args(*test);
  } else if ((t.type == TokenType::Name || t.type == TokenType::String ||
              t.type == TokenType::Integer || t.type == TokenType::Float || is_op("[") ||
              is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail_here("you cannot chain multiple tests with is");
    ExprPtr arg = parse_postfix(parse_primary());
    test->depth = std::max(test->depth, arg->depth + 1);
    test->args.push_back(std::move(arg));
  }
  if (!negated) return test;
  std::vector<ExprPtr> not_args;
  not_args.push_back(std::move(test));
  return make(ExprKind::Not, offset, std::move(not_args));
}

}  // namespace deepinfer::tokenizer::jinja
