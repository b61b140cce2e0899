#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/jinja/error.h"

namespace deepinfer::tokenizer::jinja {

namespace {

// Dicts this small are searched linearly; larger ones keep a hash index of string keys.
constexpr size_t kIndexThreshold = 8;

const std::string& empty_string() {
  static const std::string empty;
  return empty;
}

}  // namespace

TemplateError::TemplateError(ErrorKind kind, std::string message, int line, int column)
    : Error(line > 0 ? str_cat("chat template line ", line, ", column ", column, ": ", message)
                     : str_cat("chat template: ", message)),
      kind_(kind),
      message_(std::move(message)),
      line_(line),
      column_(column) {}

// ---- Dict ------------------------------------------------------------------------------

const Value* Dict::find(std::string_view key) const {
  if (!string_index_.empty()) {
    auto it = string_index_.find(std::string(key));
    return it == string_index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries_) {
    if (!k.is_string() && python_equal(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (const Value* existing = find(key)) {
    const_cast<Value&>(*existing) = std::move(value);
    return;
  }
  const uint32_t child = std::max(key.depth(), value.depth());
  if (child + 1 > kMaxValueDepth) limit_fail("values nested deeper than ", kMaxValueDepth);
  depth_ = std::max(depth_, child + 1);
  entries_.emplace_back(std::move(key), std::move(value));
  if (string_index_.empty() && entries_.size() > kIndexThreshold) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first.is_string()) string_index_.emplace(entries_[i].first.str(), i);
    }
  } else if (!string_index_.empty() && entries_.back().first.is_string()) {
    string_index_.emplace(entries_.back().first.str(), entries_.size() - 1);
  }
}

// ---- Value -----------------------------------------------------------------------------

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.ptr_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::Bool;
  v.scalar_.b = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::Int;
  v.scalar_.i = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.type_ = Type::Float;
  v.scalar_.f = f;
  return v;
}

Value Value::string(std::string s, bool markup) {
  Value v;
  v.type_ = Type::String;
  v.markup_ = markup;
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

namespace {

uint32_t list_depth(const ValueList& items) {
  uint32_t child = 0;
  for (const Value& v : items) child = std::max(child, v.depth());
  if (child + 1 > kMaxValueDepth) limit_fail("values nested deeper than ", kMaxValueDepth);
  return child + 1;
}

}  // namespace

Value Value::list(ValueList items, SeqKind kind) {
  auto data = std::make_shared<ListData>();
  data->depth = list_depth(items);
  data->items = std::move(items);
  data->kind = kind;
  Value v;
  v.type_ = Type::List;
  v.ptr_ = std::move(data);
  return v;
}

Value Value::range(ValueList items, int64_t start, int64_t stop, int64_t step) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->kind = SeqKind::Range;
  data->range[0] = start;
  data->range[1] = stop;
  data->range[2] = step;
  Value v;
  v.type_ = Type::List;
  v.ptr_ = std::move(data);
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.type_ = Type::Dict;
  v.ptr_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.type_ = Type::Object;
  v.ptr_ = std::move(o);
  return v;
}

const std::string& Value::str() const {
  return type_ == Type::String ? *static_cast<const std::string*>(ptr_.get()) : empty_string();
}

const ListData& Value::list_data() const {
  static const ListData empty;
  return type_ == Type::List ? *static_cast<const ListData*>(ptr_.get()) : empty;
}

const Dict& Value::dict() const {
  static const Dict empty;
  return type_ == Type::Dict ? *static_cast<const Dict*>(ptr_.get()) : empty;
}

Object* Value::object() const {
  return type_ == Type::Object ? const_cast<Object*>(static_cast<const Object*>(ptr_.get()))
                               : nullptr;
}

std::shared_ptr<Object> Value::object_ptr() const {
  if (type_ != Type::Object) return nullptr;
  return std::const_pointer_cast<Object>(std::static_pointer_cast<const Object>(ptr_));
}

const std::string& Value::undefined_hint() const {
  if (type_ == Type::Undefined && ptr_) return *static_cast<const std::string*>(ptr_.get());
  return empty_string();
}

uint32_t Value::depth() const {
  if (type_ == Type::List) return list_data().depth;
  if (type_ == Type::Dict) return dict().depth();
  if (type_ == Type::Object) return object()->depth();
  return 0;
}

uint32_t capture_depth(const Value& v) {
  const uint32_t d = v.depth() + 1;
  if (d > kMaxValueDepth) limit_fail("values nested deeper than ", kMaxValueDepth);
  return d;
}

bool Value::truthy() const {
  switch (type_) {
    case Type::Undefined:
    case Type::None:
      return false;
    case Type::Bool:
      return scalar_.b;
    case Type::Int:
      return scalar_.i != 0;
    case Type::Float:
      return scalar_.f != 0.0;
    case Type::String:
      return !str().empty();
    case Type::List:
      return !items().empty();
    case Type::Dict:
      return !dict().empty();
    case Type::Object:
      return object()->truthy();
  }
  return false;
}

// ---- equality and names ----------------------------------------------------------------

namespace {

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
    // int vs float: exact, as Python compares them
    const double f = a.is_float() ? a.as_float() : b.as_float();
    const int64_t i = a.is_float() ? b.as_int() : a.as_int();
    if (!std::isfinite(f) || f != std::floor(f)) return false;
    if (f < -9.2233720368547758e18 || f >= 9.2233720368547758e18) return false;
    return static_cast<int64_t>(f) == i;
  }
  return a.as_int() == b.as_int();
}

bool sequence_family_equal(SeqKind a, SeqKind b) {
  if (a == b) return true;
  return false;
}

}  // namespace

bool python_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::Undefined:
    case Type::None:
      return true;
    case Type::String:
      return a.str() == b.str();
    case Type::List: {
      if (!sequence_family_equal(a.list_data().kind, b.list_data().kind)) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!python_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Type::Dict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !python_equal(v, *other)) return false;
      }
      return true;
    }
    case Type::Object:
      return a.object() == b.object();
    default:
      return false;
  }
}

bool hashable(const Value& v) {
  if (v.is_dict()) return false;
  if (!v.is_list()) return true;
  const SeqKind kind = v.list_data().kind;
  if (kind == SeqKind::Range) return true;
  if (kind != SeqKind::Tuple) return false;
  for (const Value& item : v.items()) {
    if (!hashable(item)) return false;
  }
  return true;
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
      return "Undefined";
    case Type::None:
      return "NoneType";
    case Type::Bool:
      return "bool";
    case Type::Int:
      return "int";
    case Type::Float:
      return "float";
    case Type::String:
      return v.is_markup() ? "Markup" : "str";
    case Type::List:
      switch (v.list_data().kind) {
        case SeqKind::List:
          return "list";
        case SeqKind::Tuple:
          return "tuple";
        case SeqKind::DictKeys:
          return "dict_keys";
        case SeqKind::DictValues:
          return "dict_values";
        case SeqKind::DictItems:
          return "dict_items";
        case SeqKind::Range:
          return "range";
      }
      return "list";
    case Type::Dict:
      return "dict";
    case Type::Object:
      return v.object()->type_name();
  }
  return "object";
}

// ---- Object defaults -------------------------------------------------------------------

Value Object::get_attr(const std::string& name) {
  return Value::undefined(str_cat("'", type_name(), " object' has no attribute '", name, "'"));
}

Value Object::call(Interpreter&, ValueList, std::vector<std::pair<std::string, Value>>) {
  runtime_fail("'", type_name(), "' object is not callable");
}

std::string Object::repr() const {
  unsupported("printing a '", type_name(), "' object (Python would print its memory address)");
}

}  // namespace deepinfer::tokenizer::jinja
