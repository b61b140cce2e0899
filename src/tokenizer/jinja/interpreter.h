#pragma once
// Renders a parsed template: statements, expressions, scopes and the safety budget.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"

namespace deepinfer::tokenizer::jinja {

// Bounds on what a template may cost. Hitting one fails with ErrorKind::Limit.
struct Limits {
  int max_depth = 200;        // statement nesting / expression depth (parse)
  int max_call_depth = 64;    // macro recursion
  int max_eval_depth = 1000;  // total interpreter recursion (C++ stack)
  // Statements and expressions evaluated, plus one per 16 bytes / per item of every string
  // or list built, which also bounds the memory a render can churn through.
  int64_t max_steps = 20'000'000;
  size_t max_output_bytes = 32u << 20;  // rendered text (also each captured block)
  size_t max_string_bytes = 32u << 20;  // one string value
  size_t max_list_items = 1u << 20;     // one list value
};

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
  const std::shared_ptr<Scope>& parent() const { return parent_; }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(const ParsedTemplate& tpl, const Limits& limits);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders with `variables` visible to the template (over jinja2's default globals).
  std::string render(const Dict& variables);

  // ---- services for filters, tests, methods and objects
  Value eval(const Expr& e, const ScopePtr& scope);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value call(const Value& callee, CallArgs args);
  Value call_filter(const std::string& name, const Value& input, CallArgs args);
  bool call_test(const std::string& name, const Value& input, CallArgs args);
  // Python iteration, materialised (generators are consumed).
  ValueList iterate(const Value& v);
  void charge(int64_t steps);
  void charge_value(const Value& v);  // cost proportional to a produced value's size
  size_t max_size() const { return limits_.max_string_bytes; }
  size_t max_items() const { return limits_.max_list_items; }
  const Limits& limits() const { return limits_; }
  // Namespaces are mutable and may reference each other; the interpreter clears them when
  // it finishes so reference cycles cannot leak.
  Value make_namespace(Dict attrs);
  Value call_macro(const Stmt& macro, const std::weak_ptr<Scope>& closure, CallArgs args);

 private:
  enum class Flow { Normal, Break, Continue };
  // Bounds interpreter recursion (C++ stack) across statements, expressions and macros.
  struct DepthGuard {
    explicit DepthGuard(Interpreter& in);
    ~DepthGuard() { --in.depth_; }
    Interpreter& in;
  };

  Flow exec(const Body& body, const ScopePtr& scope);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope);
  Flow exec_if(const Stmt& s, const ScopePtr& scope);
  void exec_for(const Stmt& s, const ScopePtr& scope);
  std::string capture(const Body& body, const ScopePtr& scope);
  void assign(const Target& target, const Value& value, const ScopePtr& scope);
  void write(std::string_view text);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_output(const Expr& e, const ScopePtr& scope);
  std::optional<Value> try_fold(const Expr& e, const ScopePtr& scope, bool need_safe_repr);
  Value eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input);
  Value apply_filter_chain(const Expr& chain, const ScopePtr& scope, const Value& input);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Value& obj, const Expr& slice, const ScopePtr& scope);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope, size_t first);
  [[noreturn]] void rethrow_at(size_t offset, const struct Failure& f);

  const ParsedTemplate& tpl_;
  const Limits& limits_;
  std::string* out_ = nullptr;
  int64_t steps_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  bool folding_ = false;  // constant-folding an output expression (jinja2's as_const)
  std::vector<std::shared_ptr<Object>> namespaces_;
};

}  // namespace deepinfer::tokenizer::jinja
