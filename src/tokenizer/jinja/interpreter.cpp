// Statement execution and scoping, following jinja2's compiled code: `if` shares its
// scope, every loop iteration / macro call / with / block-set body gets a fresh child scope
// (so plain {% set %} inside a loop never leaks out — that is what namespace() is for).
#include "tokenizer/jinja/interpreter.h"

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/objects.h"
#include "tokenizer/jinja/pyformat.h"

namespace deepinfer::tokenizer::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    for (auto it = s->vars_.rbegin(); it != s->vars_.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

Interpreter::DepthGuard::DepthGuard(Interpreter& interp) : in(interp) {
  if (++in.depth_ > in.limits_.max_eval_depth) {
    --in.depth_;
    limit_fail("template recursion deeper than ", in.limits_.max_eval_depth, " levels");
  }
}

Interpreter::Interpreter(const ParsedTemplate& tpl, const Limits& limits)
    : tpl_(tpl), limits_(limits) {}

Interpreter::~Interpreter() {
  for (auto& ns : namespaces_) static_cast<Namespace*>(ns.get())->clear();
}

void Interpreter::rethrow_at(size_t offset, const Failure& f) {
  int line, column;
  offset_to_position(tpl_.source, offset, line, column);
  throw TemplateError(f.kind, f.message, line, column);
}

void Interpreter::charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    limit_fail("template exceeded its budget of ", limits_.max_steps,
               " evaluation steps (runaway loop?)");
  }
}

void Interpreter::charge_value(const Value& v) {
  if (v.is_string()) {
    charge(static_cast<int64_t>(v.str().size() / 16));
  } else if (v.is_list()) {
    charge(static_cast<int64_t>(v.items().size()));
  }
}

Value Interpreter::make_namespace(Dict attrs) {
  auto ns = std::make_shared<Namespace>(std::move(attrs));
  namespaces_.push_back(ns);
  return Value::object(std::move(ns));
}

void Interpreter::write(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    limit_fail("rendered output larger than ", limits_.max_output_bytes, " bytes");
  }
  charge(static_cast<int64_t>(text.size() / 16));
  out_->append(text);
}

std::string Interpreter::render(const Dict& variables) {
  Dict globals;
  add_default_globals(globals);
  auto global_scope = std::make_shared<Scope>(nullptr);
  for (const auto& [k, v] : globals.entries()) global_scope->set(k.str(), v);
  auto context_scope = std::make_shared<Scope>(global_scope);
  for (const auto& [k, v] : variables.entries()) {
    if (k.is_string()) context_scope->set(k.str(), v);
  }
  auto template_scope = std::make_shared<Scope>(context_scope);
  std::string out;
  out_ = &out;
  exec(tpl_.body, template_scope);
  return out;
}

std::string Interpreter::capture(const Body& body, const ScopePtr& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope) {
  for (const auto& stmt : body) {
    const Flow flow = exec_stmt(*stmt, scope);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const ScopePtr& scope) {
  DepthGuard guard(*this);
  try {
    charge(1);
    switch (s.kind) {
      case StmtKind::Data:
        write(s.text);
        return Flow::Normal;
      case StmtKind::Output:
        for (const auto& e : s.exprs) {
          const Value v = eval_output(*e, scope);
          if (v.is_string()) {
            write(v.str());
          } else {
            write(to_str(v, limits_.max_output_bytes));
          }
        }
        return Flow::Normal;
      case StmtKind::If:
        return exec_if(s, scope);
      case StmtKind::For:
        exec_for(s, scope);
        return Flow::Normal;
      case StmtKind::Set:
        assign(s.target, eval(*s.exprs[0], scope), scope);
        return Flow::Normal;
      case StmtKind::SetBlock: {
        Value text = Value::string(capture(s.bodies[0], std::make_shared<Scope>(scope)));
        if (s.filter) text = apply_filter_chain(*s.filter, scope, text);
        assign(s.target, text, scope);
        return Flow::Normal;
      }
      case StmtKind::Macro:
        scope->set(s.name, Value::object(std::make_shared<MacroObject>(&s, scope)));
        return Flow::Normal;
      case StmtKind::FilterBlock: {
        auto inner = std::make_shared<Scope>(scope);
        const Value text = Value::string(capture(s.bodies[0], inner));
        const Value result = apply_filter_chain(*s.filter, inner, text);
        write(result.is_string() ? result.str() : to_str(result, limits_.max_output_bytes));
        return Flow::Normal;
      }
      case StmtKind::With: {
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < s.targets.size(); ++i) {
          assign(s.targets[i], eval(*s.exprs[i], scope), inner);
        }
        return exec(s.bodies[0], inner);
      }
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
      case StmtKind::Scope:
        return exec(s.bodies[0], std::make_shared<Scope>(scope));
    }
  } catch (const Failure& f) {
    rethrow_at(s.offset, f);
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_if(const Stmt& s, const ScopePtr& scope) {
  for (size_t i = 0; i < s.exprs.size(); ++i) {
    if (eval(*s.exprs[i], scope).truthy()) return exec(s.bodies[i], scope);
  }
  if (s.bodies.size() > s.exprs.size()) return exec(s.bodies.back(), scope);
  return Flow::Normal;
}

void Interpreter::exec_for(const Stmt& s, const ScopePtr& scope) {
  ValueList items = iterate(eval(*s.exprs[0], scope));
  if (s.exprs[1]) {
    // {% for x in xs if cond %}: filtered before the loop, so loop.index/length count only
    // the items kept.
    ValueList kept;
    for (auto& item : items) {
      charge(1);
      auto probe = std::make_shared<Scope>(scope);
      assign(s.target, item, probe);
      if (eval(*s.exprs[1], probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  auto shared_items = std::make_shared<const ValueList>(std::move(items));
  auto changed = std::make_shared<std::optional<ValueList>>();
  uint32_t items_depth = 0;
  for (const Value& v : *shared_items) items_depth = std::max(items_depth, v.depth());
  const uint32_t loop_depth = capture_depth(Value::list({}, SeqKind::List)) + items_depth;
  if (loop_depth > kMaxValueDepth) limit_fail("values nested deeper than ", kMaxValueDepth);
  // jinja2 runs the else block unless some iteration reached the end of the body (so a loop
  // whose iterations all end in break / continue runs it too).
  bool completed = false;
  for (size_t i = 0; i < shared_items->size(); ++i) {
    charge(1);
    auto iteration = std::make_shared<Scope>(scope);
    assign(s.target, (*shared_items)[i], iteration);
    iteration->set(
        "loop", Value::object(std::make_shared<LoopObject>(shared_items, i, changed, loop_depth)));
    const Flow flow = exec(s.bodies[0], iteration);
    if (flow == Flow::Normal) completed = true;
    if (flow == Flow::Break) break;
  }
  if (!completed && !s.bodies[1].empty()) exec(s.bodies[1], std::make_shared<Scope>(scope));
}

void Interpreter::assign(const Target& target, const Value& value, const ScopePtr& scope) {
  switch (target.kind) {
    case Target::Kind::Name:
      scope->set(target.name, value);
      return;
    case Target::Kind::NamespaceAttr: {
      const Value* ns = scope->find(target.name);
      auto* object = ns && ns->is_object() ? dynamic_cast<Namespace*>(ns->object()) : nullptr;
      if (!object) runtime_fail("cannot assign attribute on non-namespace object");
      object->set(target.attr, value);
      return;
    }
    case Target::Kind::Tuple: {
      const ValueList parts = iterate(value);
      if (parts.size() < target.items.size()) {
        runtime_fail("not enough values to unpack (expected ", target.items.size(), ", got ",
                     parts.size(), ")");
      }
      if (parts.size() > target.items.size()) {
        runtime_fail("too many values to unpack (expected ", target.items.size(), ")");
      }
      for (size_t i = 0; i < parts.size(); ++i) assign(target.items[i], parts[i], scope);
      return;
    }
  }
}

Value Interpreter::call_macro(const Stmt& macro, const std::weak_ptr<Scope>& closure,
                              CallArgs args) {
  ScopePtr parent = closure.lock();
  if (!parent) {
    unsupported("calling macro '", macro.name, "' after the block that defined it has ended");
  }
  if (call_depth_ >= limits_.max_call_depth) {
    limit_fail("macro calls nested deeper than ", limits_.max_call_depth, " (recursive macro?)");
  }
  auto scope = std::make_shared<Scope>(parent);
  const size_t n = macro.params.size();
  if (args.positional.size() > n && !macro.catch_varargs) {
    runtime_fail("macro '", macro.name, "' takes not more than ", n, " argument(s)");
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string& param = macro.params[i];
    std::optional<Value> value;
    if (i < args.positional.size()) {
      value = args.positional[i];
    } else {
      for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
        if (it->first == param) {
          value = std::move(it->second);
          args.keyword.erase(it);
          break;
        }
      }
    }
    if (value) {
      scope->set(param, *value);
    } else if (macro.exprs[i]) {
      scope->set(param, eval(*macro.exprs[i], scope));
    } else {
      scope->set(param, Value::undefined("parameter '" + param + "' was not provided"));
    }
  }
  if (macro.catch_kwargs) {
    Dict kwargs;
    for (auto& [k, v] : args.keyword) kwargs.set(Value::string(k), v);
    scope->set("kwargs", Value::dict(std::move(kwargs)));
  } else if (!args.keyword.empty()) {
    runtime_fail("macro '", macro.name, "' takes no keyword argument '", args.keyword[0].first,
                 "'");
  }
  if (macro.catch_varargs) {
    ValueList rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->set("varargs", Value::list(std::move(rest), SeqKind::Tuple));
  }
  ++call_depth_;
  std::string text;
  try {
    text = capture(macro.bodies[0], scope);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(text));
}

}  // namespace deepinfer::tokenizer::jinja
