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

}  // namespace deepinfer::tokenizer::jinja
