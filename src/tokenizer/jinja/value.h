#pragma once
// The values a template computes with, modelled on the Python objects jinja2 sees when
// transformers renders a chat template: JSON data (None, bool, int, float, str, list, dict),
// tuples and dict views, plus objects (namespace, loop, macros, methods, generators).
// Strings, lists and dicts are immutable once built (jinja2's ImmutableSandboxedEnvironment
// forbids mutating them), so values share their storage and copy cheaply.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace deepinfer::tokenizer::jinja {

class Value;
class Object;
class Interpreter;
using ValueList = std::vector<Value>;

enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

// Python sequence types that share the list storage but differ in printing and indexing.
enum class SeqKind : uint8_t { List, Tuple, DictKeys, DictValues, DictItems, Range };

// Containers nested deeper than this are refused: it bounds the recursion of printing,
// comparing and freeing values built by a hostile template or request.
constexpr uint32_t kMaxValueDepth = 256;

struct ListData {
  ValueList items;
  SeqKind kind = SeqKind::List;
  uint32_t depth = 1;            // 1 + deepest nested container
  int64_t range[3] = {0, 0, 1};  // start, stop, step when kind == Range (for its repr)
};

class Dict;

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool markup = false);
  static Value list(ValueList items, SeqKind kind = SeqKind::List);
  static Value range(ValueList items, int64_t start, int64_t stop, int64_t step);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> o);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_bool() const { return type_ == Type::Bool; }
  // Python's int includes bool; is_int() is the strict check.
  bool is_int() const { return type_ == Type::Int; }
  bool is_integral() const { return type_ == Type::Int || type_ == Type::Bool; }
  bool is_float() const { return type_ == Type::Float; }
  bool is_number() const { return is_integral() || is_float(); }
  bool is_string() const { return type_ == Type::String; }
  bool is_list() const { return type_ == Type::List; }
  bool is_dict() const { return type_ == Type::Dict; }
  bool is_object() const { return type_ == Type::Object; }
  bool is_markup() const { return type_ == Type::String && markup_; }
  // list or tuple (indexable sequences built from list storage)
  bool is_sequence_kind(SeqKind k) const { return is_list() && list_data().kind == k; }

  bool as_bool() const { return scalar_.b; }
  int64_t as_int() const { return type_ == Type::Bool ? (scalar_.b ? 1 : 0) : scalar_.i; }
  double as_float() const {
    return type_ == Type::Float ? scalar_.f : static_cast<double>(as_int());
  }
  const std::string& str() const;
  const ListData& list_data() const;
  const ValueList& items() const { return list_data().items; }
  const Dict& dict() const;
  Object* object() const;
  std::shared_ptr<Object> object_ptr() const;
  // The message jinja2 would raise when an undefined value is used ("'x' is undefined").
  const std::string& undefined_hint() const;

  // Python truthiness (Undefined is false).
  bool truthy() const;
  // Container nesting depth (0 for scalars and objects).
  uint32_t depth() const;

 private:
  Type type_ = Type::Undefined;
  bool markup_ = false;
  union Scalar {
    bool b;
    int64_t i;
    double f;
  } scalar_{};
  std::shared_ptr<const void> ptr_;  // string / ListData / Dict / Object / undefined hint
};

// An insertion-ordered mapping with Python key equality (1 == 1.0 == True).
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces in place or appends
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  uint32_t depth() const { return depth_; }

 private:
  uint32_t depth_ = 1;
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> string_index_;  // string keys -> position
};

// Python ==, never raises (values of unrelated types compare unequal).
bool python_equal(const Value& a, const Value& b);

// Whether Python can hash the value (use it as a dict key): not lists, dicts or dict views,
// nor tuples containing them.
bool hashable(const Value& v);

// Python type name for messages: 'str', 'int', 'dict', 'NoneType', ...
std::string type_name(const Value& v);

// Objects: namespace, loop, macros, builtin functions, bound methods, generators.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  // Attribute lookup; Undefined when absent.
  virtual Value get_attr(const std::string& name);
  virtual bool callable() const { return false; }
  virtual Value call(Interpreter& in, ValueList args,
                     std::vector<std::pair<std::string, Value>> kwargs);
  // Python repr(); throws when it cannot be reproduced (it would contain an address).
  virtual std::string repr() const;
  // Iteration for lazy objects (generators); false if not iterable.
  virtual bool iterable() const { return false; }
  virtual bool next(Value& out) {
    (void)out;
    return false;
  }
  virtual bool truthy() const { return true; }
  // Depth of the values the object holds on to (bound method -> its receiver, generator ->
  // its items), so chains of objects and containers stay bounded like nested containers.
  virtual uint32_t depth() const { return 0; }
};

// depth(v) + 1, failing (Limit) beyond kMaxValueDepth: for objects that capture v.
uint32_t capture_depth(const Value& v);

}  // namespace deepinfer::tokenizer::jinja
