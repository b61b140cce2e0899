// Postfix parsing (jinja2 parser.py): subscripts, slices, calls, filters and tests.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser_impl.h"

namespace deepinfer::tokenizer::jinja {

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
