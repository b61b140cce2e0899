#pragma once
// Parsed template: statements and expressions as jinja2's parser builds them.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

class Interpreter;
struct CallArgs;
using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

enum class ExprKind {
  Const,     // value
  Name,      // name
  List,      // args
  Tuple,     // args
  Dict,      // args: key, value, key, value, ...
  Getattr,   // args[0].name
  Getitem,   // args[0][args[1]]
  Slice,     // args: start, stop, step (each may be null)
  Call,      // args[0](args[1:], kwargs)
  Filter,    // args[0] | name(args[1:], kwargs); args[0] null inside filter blocks
  Test,      // args[0] is name(args[1:], kwargs)
  Neg,       // -args[0]
  Pos,       // +args[0]
  Not,       // not args[0]
  Binary,    // args[0] op args[1]
  And,       // args[0] and args[1]
  Or,        // args[0] or args[1]
  Compare,   // args[0] cmp_ops[0] args[1] cmp_ops[1] args[2] ...
  Concat,    // args[0] ~ args[1] ~ ...
  CondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  size_t offset = 0;  // source position for error messages
  int depth = 1;      // height of this subtree (bounded at parse time)
  Value value;
  std::string name;
  BinOp op = BinOp::Add;
  std::vector<CmpOp> cmp_ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  FilterFn filter = nullptr;  // resolved filter (Filter); null: fails when evaluated
  TestFn test = nullptr;      // resolved test (Test)
  // jinja2 may evaluate this subtree at compile time (no variables, calls or context
  // filters) and it contains a slice, whose compile-time result can differ from the run-time
  // one; see Interpreter::try_fold.
  bool fold = false;
};

// Assignment target of for / set / with.
struct Target {
  enum class Kind { Name, NamespaceAttr, Tuple };
  Kind kind = Kind::Name;
  std::string name;  // variable (Name, NamespaceAttr)
  std::string attr;  // NamespaceAttr
  std::vector<Target> items;
};

enum class StmtKind {
  Data,         // text
  Output,       // exprs, each printed
  If,           // exprs[i] guards bodies[i]; an extra trailing body is the else
  For,          // target in exprs[0] [if exprs[1]]: bodies[0], else bodies[1]
  Set,          // target = exprs[0]
  SetBlock,     // target = rendered bodies[0], piped through filter
  Macro,        // name(params = exprs defaults): bodies[0]
  FilterBlock,  // bodies[0] piped through filter
  With,         // targets = exprs: bodies[0]
  Break,
  Continue,
  Scope,  // bodies[0] rendered as is ({% generation %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind;
  size_t offset = 0;
  std::string text;
  std::vector<ExprPtr> exprs;  // For: exprs[1] is the loop filter (may be null)
  std::vector<Body> bodies;
  Target target;
  std::vector<Target> targets;
  ExprPtr filter;  // SetBlock / FilterBlock: a Filter chain whose innermost input is null
  // Macro
  std::string name;
  std::vector<std::string> params;
  bool catch_varargs = false;  // the body reads `varargs`
  bool catch_kwargs = false;   // the body reads `kwargs`
};

// Sets Expr::fold over the whole template (after parsing).
void mark_constant_folds(Body& body);

}  // namespace deepinfer::tokenizer::jinja
