#pragma once
// Template objects that are not plain data: namespace(), the for-loop `loop`, macros,
// native functions, bound methods and lazy generators (what jinja2's select/map return).
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

class Scope;

// transformers' TemplateNamespace: attributes settable with {% set ns.x = ... %}.
class Namespace : public Object {
 public:
  explicit Namespace(Dict attrs) : attrs_(std::move(attrs)) {}
  std::string type_name() const override { return "Namespace"; }
  Value get_attr(const std::string& name) override;
  std::string repr() const override;
  void set(const std::string& name, Value value);
  void clear() { attrs_ = Dict(); }

 private:
  Dict attrs_;
};

// jinja2's LoopContext for a non-recursive loop.
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  // `changed` is state of the whole loop (loop.changed() compares with the previous
  // iteration's call), so iterations share it.
  LoopObject(std::shared_ptr<const ValueList> items, size_t index0,
             std::shared_ptr<std::optional<ValueList>> changed, uint32_t depth)
      : items_(std::move(items)),
        index0_(index0),
        last_changed_(std::move(changed)),
        depth_(depth) {}
  uint32_t depth() const override { return depth_; }
  std::string type_name() const override { return "LoopContext"; }
  Value get_attr(const std::string& name) override;
  std::string repr() const override;

 private:
  std::shared_ptr<const ValueList> items_;
  size_t index0_;
  std::shared_ptr<std::optional<ValueList>> last_changed_;
  uint32_t depth_;
};

class MacroObject : public Object {
 public:
  MacroObject(const Stmt* stmt, std::weak_ptr<Scope> closure)
      : stmt_(stmt), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  Value call(Interpreter& in, ValueList args,
             std::vector<std::pair<std::string, Value>> kwargs) override;
  std::string repr() const override;

 private:
  const Stmt* stmt_;
  std::weak_ptr<Scope> closure_;
};

// A C++ callable: globals, bound methods, loop.cycle.
class NativeCallable : public Object {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  // depth: capture_depth() of what fn captured (0 for plain functions).
  NativeCallable(std::string name, std::string kind, Fn fn, uint32_t depth = 0)
      : name_(std::move(name)), kind_(std::move(kind)), fn_(std::move(fn)), depth_(depth) {}
  uint32_t depth() const override { return depth_; }
  std::string type_name() const override { return kind_; }
  bool callable() const override { return true; }
  Value call(Interpreter& in, ValueList args,
             std::vector<std::pair<std::string, Value>> kwargs) override;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::string kind_;
  Fn fn_;
  uint32_t depth_;
};

// A single-use lazy sequence (Python generator / iterator), e.g. the result of |select.
class Generator : public Object {
 public:
  using NextFn = std::function<bool(Value&)>;
  Generator(std::string kind, NextFn next, uint32_t depth)
      : kind_(std::move(kind)), next_(std::move(next)), depth_(depth) {}
  uint32_t depth() const override { return depth_; }
  std::string type_name() const override { return kind_; }
  bool iterable() const override { return true; }
  bool next(Value& out) override;

 private:
  std::string kind_;
  NextFn next_;
  bool done_ = false;
  uint32_t depth_;
};

}  // namespace deepinfer::tokenizer::jinja
