#pragma once
// The recursive-descent parser shared by parser.cpp (statements) and parser_expr.cpp
// (expressions). Internal to the jinja folder.
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/lexer.h"

namespace deepinfer::tokenizer::jinja {

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& source, int max_depth)
      : tokens_(std::move(tokens)), source_(source), max_depth_(max_depth) {}

  Body parse_template_body();

  // ---- statements (parser.cpp)
  Body subparse(std::initializer_list<std::string_view> end_tags);
  Body parse_statements(std::initializer_list<std::string_view> end_tags, bool drop_needle);
  StmtPtr parse_statement();
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  StmtPtr parse_macro();
  StmtPtr parse_with();
  Target parse_assign_target(std::initializer_list<std::string_view> extra_end, bool with_namespace,
                             bool name_only = false);
  Target parse_target_item(bool with_namespace);

  // ---- expressions (parser_expr.cpp)
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary();
  ExprPtr parse_tuple(bool with_condexpr = true,
                      std::initializer_list<std::string_view> extra_end = {},
                      bool explicit_parentheses = false);
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  void parse_call_args(Expr& call);

  // ---- token helpers
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_name(std::string_view v) const {
    return cur().type == TokenType::Name && cur().text == v;
  }
  bool is_op(std::string_view v) const {
    return cur().type == TokenType::Operator && cur().text == v;
  }
  bool skip_name(std::string_view v) {
    if (!is_name(v)) return false;
    advance();
    return true;
  }
  bool skip_op(std::string_view v) {
    if (!is_op(v)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view v);
  std::string expect_name();
  void expect(TokenType type);
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  std::string describe(const Token& t) const;

  [[noreturn]] void fail(const std::string& message, size_t offset,
                         ErrorKind kind = ErrorKind::Syntax) const;
  [[noreturn]] void fail_here(const std::string& message) const { fail(message, cur().offset); }

  // Builds an expression node, bounding the tree height.
  ExprPtr make(ExprKind kind, size_t offset, std::vector<ExprPtr> args = {});
  ExprPtr make_const(Value v, size_t offset);

  // Recursion guard for nested constructs (parentheses, unary chains, blocks).
  struct Nest {
    explicit Nest(Parser& p) : parser(p) {
      if (++parser.nesting_ > parser.max_depth_) {
        parser.fail("template nested deeper than the limit of " +
                        std::to_string(parser.max_depth_) + " levels",
                    parser.cur().offset, ErrorKind::Limit);
      }
    }
    ~Nest() { --parser.nesting_; }
    Parser& parser;
  };

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const std::string& source_;
  int max_depth_;
  int nesting_ = 0;
  int loop_depth_ = 0;
  // One entry per macro being parsed: [reads varargs, reads kwargs].
  std::vector<std::pair<bool, bool>> macro_reads_;
  friend struct Nest;
};

// Checks filter and test names after parsing: unknown ones fail unless they sit inside an
// {% if %} or an inline if-expression, where jinja2 defers the error to render time.
void validate_names(const Body& body, const std::string& source);

}  // namespace deepinfer::tokenizer::jinja
