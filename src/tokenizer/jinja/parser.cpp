// Statement parsing (jinja2 parser.py: subparse, parse_statement and the parse_<tag> methods).
#include "tokenizer/jinja/parser.h"

#include "tokenizer/jinja/parser_impl.h"

namespace deepinfer::tokenizer::jinja {

namespace {

std::string join_tags(std::initializer_list<std::string_view> tags) {
  std::string out;
  for (auto t : tags) {
    if (!out.empty()) out += " or ";
    out += "'" + std::string(t) + "'";
  }
  return out;
}

}  // namespace

void Parser::fail(const std::string& message, size_t offset, ErrorKind kind) const {
  int line, column;
  offset_to_position(source_, offset, line, column);
  throw TemplateError(kind, message, line, column);
}

std::string Parser::describe(const Token& t) const {
  switch (t.type) {
    case TokenType::Data:
      return "template data";
    case TokenType::VariableBegin:
      return "begin of print statement";
    case TokenType::VariableEnd:
      return "end of print statement";
    case TokenType::BlockBegin:
      return "begin of statement block";
    case TokenType::BlockEnd:
      return "end of statement block";
    case TokenType::Eof:
      return "end of template";
    case TokenType::String:
      return "string";
    default:
      return "'" + t.text + "'";
  }
}

void Parser::expect_op(std::string_view v) {
  if (!skip_op(v)) fail_here("expected '" + std::string(v) + "', got " + describe(cur()));
}

std::string Parser::expect_name() {
  if (cur().type != TokenType::Name) fail_here("expected a name, got " + describe(cur()));
  std::string name = cur().text;
  advance();
  return name;
}

void Parser::expect(TokenType type) {
  if (cur().type != type) {
    const char* what = type == TokenType::BlockEnd      ? "end of statement block"
                       : type == TokenType::VariableEnd ? "end of print statement"
                                                        : "token";
    fail_here(std::string("expected ") + what + ", got " + describe(cur()));
  }
  advance();
}

Body Parser::parse_template_body() {
  Body body = subparse({});
  if (cur().type != TokenType::Eof) fail_here("unexpected " + describe(cur()));
  return body;
}

Body Parser::subparse(std::initializer_list<std::string_view> end_tags) {
  Body body;
  while (cur().type != TokenType::Eof) {
    const Token& tok = cur();
    if (tok.type == TokenType::Data) {
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = StmtKind::Data;
      stmt->offset = tok.offset;
      stmt->text = tok.text;
      body.push_back(std::move(stmt));
      advance();
    } else if (tok.type == TokenType::VariableBegin) {
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = StmtKind::Output;
      stmt->offset = tok.offset;
      advance();
      stmt->exprs.push_back(parse_tuple(true));
      expect(TokenType::VariableEnd);
      body.push_back(std::move(stmt));
    } else if (tok.type == TokenType::BlockBegin) {
      advance();
      if (cur().type == TokenType::Name) {
        for (auto tag : end_tags) {
          if (cur().text == tag) return body;
        }
      }
      body.push_back(parse_statement());
      expect(TokenType::BlockEnd);
    } else {
      fail_here("unexpected " + describe(tok));
    }
  }
  if (end_tags.size() > 0) {
    fail_here("unexpected end of template, expected " + join_tags(end_tags));
  }
  return body;
}

Body Parser::parse_statements(std::initializer_list<std::string_view> end_tags, bool drop_needle) {
  skip_op(":");
  expect(TokenType::BlockEnd);
  Body body = subparse(end_tags);
  if (drop_needle) advance();
  return body;
}

StmtPtr Parser::parse_statement() {
  Nest nest(*this);
  const Token& tok = cur();
  if (tok.type != TokenType::Name) fail_here("tag name expected");
  const std::string& name = tok.text;
  if (name == "for") return parse_for();
  if (name == "if") return parse_if();
  if (name == "set") return parse_set();
  if (name == "macro") return parse_macro();
  if (name == "with") return parse_with();
  auto stmt = std::make_unique<Stmt>();
  stmt->offset = tok.offset;
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) fail_here("'" + name + "' outside of a loop");
    stmt->kind = name == "break" ? StmtKind::Break : StmtKind::Continue;
    advance();
    return stmt;
  }
  if (name == "print") {
    advance();
    stmt->kind = StmtKind::Output;
    while (cur().type != TokenType::BlockEnd) {
      if (!stmt->exprs.empty()) expect_op(",");
      stmt->exprs.push_back(parse_expression());
    }
    return stmt;
  }
  if (name == "filter") {
    advance();
    stmt->kind = StmtKind::FilterBlock;
    stmt->filter = parse_filter(nullptr, true);
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    stmt->bodies.push_back(parse_statements({"endfilter"}, true));
    loop_depth_ = saved_loops;
    return stmt;
  }
  if (name == "generation") {
    advance();
    stmt->kind = StmtKind::Scope;
    stmt->bodies.push_back(parse_statements({"endgeneration"}, true));
    return stmt;
  }
  if (name == "include" || name == "extends" || name == "import" || name == "from" ||
      name == "block") {
    fail("{% " + name + " %} is not supported: chat templates are rendered standalone", tok.offset,
         ErrorKind::Unsupported);
  }
  if (name == "call" || name == "autoescape") {
    fail("{% " + name + " %} blocks are not supported", tok.offset, ErrorKind::Unsupported);
  }
  if (name == "do") {
    fail("{% do %} needs jinja2's 'do' extension, which transformers does not enable", tok.offset);
  }
  fail("encountered unknown tag '" + name + "'", tok.offset);
}

StmtPtr Parser::parse_for() {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::For;
  stmt->offset = cur().offset;
  advance();
  stmt->target = parse_assign_target({"in"}, false);
  if (!skip_name("in")) fail_here("expected 'in', got " + describe(cur()));
  stmt->exprs.push_back(parse_tuple(false, {"recursive"}));
  stmt->exprs.push_back(skip_name("if") ? parse_expression() : nullptr);
  if (is_name("recursive"))
    fail("recursive for loops are not supported", cur().offset, ErrorKind::Unsupported);
  ++loop_depth_;
  stmt->bodies.push_back(parse_statements({"endfor", "else"}, false));
  --loop_depth_;
  const bool has_else = is_name("else");
  advance();
  stmt->bodies.push_back(has_else ? parse_statements({"endfor"}, true) : Body{});
  return stmt;
}

StmtPtr Parser::parse_if() {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::If;
  stmt->offset = cur().offset;
  advance();
  while (true) {
    stmt->exprs.push_back(parse_tuple(false));
    stmt->bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
    const std::string tag = cur().text;
    advance();
    if (tag == "elif") continue;
    if (tag == "else") stmt->bodies.push_back(parse_statements({"endif"}, true));
    break;
  }
  return stmt;
}

StmtPtr Parser::parse_set() {
  auto stmt = std::make_unique<Stmt>();
  stmt->offset = cur().offset;
  advance();
  stmt->target = parse_assign_target({}, true);
  if (skip_op("=")) {
    stmt->kind = StmtKind::Set;
    stmt->exprs.push_back(parse_tuple());
    return stmt;
  }
  stmt->kind = StmtKind::SetBlock;
  stmt->filter = parse_filter(nullptr, false);
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  stmt->bodies.push_back(parse_statements({"endset"}, true));
  loop_depth_ = saved_loops;
  return stmt;
}

StmtPtr Parser::parse_macro() {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::Macro;
  stmt->offset = cur().offset;
  advance();
  stmt->name = expect_name();
  expect_op("(");
  bool have_default = false;
  while (!is_op(")")) {
    if (!stmt->params.empty()) expect_op(",");
    if (is_op(")")) break;
    stmt->params.push_back(expect_name());
    if (skip_op("=")) {
      stmt->exprs.push_back(parse_expression());
      have_default = true;
    } else {
      if (have_default) fail_here("non-default argument follows default argument");
      stmt->exprs.push_back(nullptr);
    }
  }
  expect_op(")");
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  macro_reads_.emplace_back(false, false);
  stmt->bodies.push_back(parse_statements({"endmacro"}, true));
  stmt->catch_varargs = macro_reads_.back().first;
  stmt->catch_kwargs = macro_reads_.back().second;
  macro_reads_.pop_back();
  loop_depth_ = saved_loops;
  return stmt;
}

StmtPtr Parser::parse_with() {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::With;
  stmt->offset = cur().offset;
  advance();
  while (cur().type != TokenType::BlockEnd) {
    if (!stmt->targets.empty()) expect_op(",");
    stmt->targets.push_back(parse_assign_target({}, false));
    expect_op("=");
    stmt->exprs.push_back(parse_expression());
  }
  stmt->bodies.push_back(parse_statements({"endwith"}, true));
  return stmt;
}

Target Parser::parse_target_item(bool with_namespace) {
  const Token& tok = cur();
  if (tok.type == TokenType::Name) {
    static const char* const kConstants[] = {"true", "false", "none", "True", "False", "None"};
    for (const char* c : kConstants) {
      if (tok.text == c) fail_here("can't assign to 'const'");
    }
    Target t;
    t.name = tok.text;
    advance();
    if (with_namespace && is_op(".")) {
      advance();
      t.kind = Target::Kind::NamespaceAttr;
      t.attr = expect_name();
    }
    return t;
  }
  if (is_op("(")) {
    Nest nest(*this);
    advance();
    Target t;
    t.kind = Target::Kind::Tuple;
    bool is_tuple = false;
    while (!is_op(")")) {
      if (!t.items.empty()) expect_op(",");
      if (is_op(")")) break;
      t.items.push_back(parse_target_item(false));
      if (is_op(",")) is_tuple = true;
    }
    expect_op(")");
    if (!is_tuple && t.items.size() == 1) return std::move(t.items[0]);
    return t;
  }
  fail_here("can't assign to " + describe(tok));
}

Target Parser::parse_assign_target(std::initializer_list<std::string_view> extra_end,
                                   bool with_namespace, bool name_only) {
  if (name_only) {
    Target t;
    t.name = expect_name();
    return t;
  }
  Target tuple;
  tuple.kind = Target::Kind::Tuple;
  bool is_tuple = false;
  while (true) {
    if (!tuple.items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    tuple.items.push_back(parse_target_item(with_namespace));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (tuple.items.empty()) fail_here("expected an assignment target, got " + describe(cur()));
    return std::move(tuple.items[0]);
  }
  return tuple;
}

ParsedTemplate parse_template(std::string_view source, int max_depth) {
  LexResult lexed = lex(source);
  ParsedTemplate result;
  result.source = std::move(lexed.source);
  Parser parser(std::move(lexed.tokens), result.source, max_depth);
  result.body = parser.parse_template_body();
  validate_names(result.body, result.source);
  mark_constant_folds(result.body);
  return result;
}

}  // namespace deepinfer::tokenizer::jinja
