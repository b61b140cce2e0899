// Post-parse check of filter and test names, with jinja2's "soft frame" rule: inside an
// {% if %} (its tests and bodies) or an inline if-expression an unknown name only fails
// when evaluated; anywhere else it fails at parse time, as jinja2's compiler does.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser_impl.h"

namespace deepinfer::tokenizer::jinja {

namespace {

class Validator {
 public:
  explicit Validator(const std::string& source) : source_(source) {}

  void body(const Body& b, bool soft) {
    for (const auto& s : b) stmt(*s, soft);
  }

 private:
  [[noreturn]] void fail(const Expr& e, const std::string& what, bool jinja_knows) const {
    int line, column;
    offset_to_position(source_, e.offset, line, column);
    if (jinja_knows) {
      throw TemplateError(ErrorKind::Unsupported, what + " '" + e.name + "' is not supported", line,
                          column);
    }
    throw TemplateError(ErrorKind::Syntax, "no " + what + " named '" + e.name + "'", line, column);
  }

  void expr(const Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == ExprKind::Filter && !e->filter && !soft) {
      fail(*e, "filter", jinja_knows_filter(e->name));
    }
    if (e->kind == ExprKind::Test && !e->test && !soft) fail(*e, "test", jinja_knows_test(e->name));
    const bool inner_soft = soft || e->kind == ExprKind::CondExpr;
    for (const auto& a : e->args) expr(a.get(), inner_soft);
    for (const auto& [name, a] : e->kwargs) expr(a.get(), inner_soft);
  }

  void stmt(const Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::If:
        for (const auto& e : s.exprs) expr(e.get(), true);
        for (const auto& b : s.bodies) body(b, true);
        return;
      case StmtKind::For:
        for (const auto& e : s.exprs) expr(e.get(), soft);
        body(s.bodies[0], false);
        body(s.bodies[1], soft);
        return;
      case StmtKind::SetBlock:
      case StmtKind::FilterBlock:
        expr(s.filter.get(), s.kind == StmtKind::SetBlock ? soft : false);
        body(s.bodies[0], false);
        return;
      case StmtKind::With:
        for (const auto& e : s.exprs) expr(e.get(), soft);
        body(s.bodies[0], false);
        return;
      case StmtKind::Macro:
        for (const auto& e : s.exprs) expr(e.get(), false);
        body(s.bodies[0], false);
        return;
      case StmtKind::Scope:
        body(s.bodies[0], false);
        return;
      default:
        for (const auto& e : s.exprs) expr(e.get(), soft);
        for (const auto& b : s.bodies) body(b, soft);
    }
  }

  const std::string& source_;
};

}  // namespace

namespace {

// jinja2 folds an expression at compile time when every part has a constant value: no
// names or calls, no filter that takes the template context, no unknown filter or test.
// (Inline ifs are decided when evaluated: only their test and the branch taken matter.)
bool may_fold(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name:
    case ExprKind::Call:
      return false;
    case ExprKind::Filter:
      if (!e.filter || !e.args[0] || e.name == "map" || e.name == "select" || e.name == "reject" ||
          e.name == "selectattr" || e.name == "rejectattr") {
        return false;
      }
      break;
    case ExprKind::Test:
      if (!e.test) return false;
      break;
    case ExprKind::CondExpr:
      return true;
    default:
      break;
  }
  for (const auto& a : e.args) {
    if (a && !may_fold(*a)) return false;
  }
  for (const auto& [name, a] : e.kwargs) {
    if (!may_fold(*a)) return false;
  }
  return true;
}

// Marks subtrees; returns whether e contains a slice.
bool mark(Expr& e) {
  bool slice = e.kind == ExprKind::Slice;
  for (auto& a : e.args) {
    if (a && mark(*a)) slice = true;
  }
  for (auto& [name, a] : e.kwargs) {
    if (mark(*a)) slice = true;
  }
  e.fold = slice && may_fold(e);
  return slice;
}

void mark_body(Body& body) {
  for (auto& s : body) {
    for (auto& e : s->exprs) {
      if (e) mark(*e);
    }
    if (s->filter) mark(*s->filter);
    for (auto& b : s->bodies) mark_body(b);
  }
}

}  // namespace

void mark_constant_folds(Body& body) {
  mark_body(body);
}

void validate_names(const Body& body, const std::string& source) {
  Validator(source).body(body, false);
}

}  // namespace deepinfer::tokenizer::jinja
