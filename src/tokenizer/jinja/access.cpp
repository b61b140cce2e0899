// Attribute access, subscripts, slices and iteration with the rules of jinja2's sandbox:
// `a.b` tries the attribute first then the item, `a[b]` the item first then the attribute,
// and whatever is missing is Undefined (which only fails once it is used).
#include <optional>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

Value missing_attribute(const Value& obj, const std::string& name) {
  if (obj.is_none()) return Value::undefined("'None' has no attribute '" + name + "'");
  return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
}

bool indexable_sequence(const Value& v) {
  if (!v.is_list()) return false;
  const SeqKind k = v.list_data().kind;
  return k == SeqKind::List || k == SeqKind::Tuple || k == SeqKind::Range;
}

// Python's slice.indices(): the positions a[start:stop:step] visits.
std::vector<int64_t> slice_positions(int64_t length, std::optional<int64_t> start,
                                     std::optional<int64_t> stop, int64_t step) {
  auto adjust = [&](std::optional<int64_t> v, int64_t if_missing) {
    if (!v) return if_missing;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= length) {
      x = step < 0 ? length - 1 : length;
    }
    return x;
  };
  const int64_t lo = adjust(start, step < 0 ? length - 1 : 0);
  const int64_t hi = adjust(stop, step < 0 ? -1 : length);
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = lo; i < hi; i += step) out.push_back(i);
  } else {
    for (int64_t i = lo; i > hi; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Type::Undefined:
      undefined_fail(obj);
    case Type::Object:
      if (!name.empty() && name[0] == '_') {
        return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                                "' object is unsafe.");
      }
      return obj.object()->get_attr(name);
    case Type::Dict: {
      if (auto method = builtin_method(obj, name)) return *method;
      if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
      return missing_attribute(obj, name);
    }
    case Type::String:
    case Type::List:
      if (auto method = builtin_method(obj, name)) return *method;
      return missing_attribute(obj, name);
    default:
      return missing_attribute(obj, name);
  }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_fail(obj);
  if (obj.is_dict()) {
    if (hashable(key)) {
      if (const Value* v = obj.dict().find(key)) return *v;
    }
  } else if ((indexable_sequence(obj) || obj.is_string()) && key.is_integral()) {
    const int64_t length = obj.is_string() ? static_cast<int64_t>(unicode::length(obj.str()))
                                           : static_cast<int64_t>(obj.items().size());
    int64_t i = key.as_int();
    if (i < 0) i += length;
    if (i >= 0 && i < length) {
      if (!obj.is_string()) return obj.items()[static_cast<size_t>(i)];
      if (unicode::is_ascii(obj.str())) {
        return Value::string(obj.str().substr(static_cast<size_t>(i), 1), obj.is_markup());
      }
      const std::u32string cps = unicode::decode(obj.str());
      return Value::string(unicode::encode(std::u32string_view(&cps[static_cast<size_t>(i)], 1)),
                           obj.is_markup());
    }
    return Value::undefined("index out of range");
  }
  // Lookup failed (or the type has no items): a string key falls back to the attribute.
  if (key.is_string()) {
    if (obj.is_object() || obj.is_dict() || obj.is_string() || obj.is_list()) {
      if (obj.is_dict()) {
        if (auto method = builtin_method(obj, key.str())) return *method;
        return missing_attribute(obj, key.str());
      }
      return getattr(obj, key.str());
    }
    return missing_attribute(obj, key.str());
  }
  return Value::undefined("'" + type_name(obj) + " object' has no item");
}

// jinja2 compiles a[b:c] as a plain Python subscript (not through the sandbox's getitem),
// so bad indices and unsliceable values raise instead of giving Undefined.
Value Interpreter::eval_slice(const Value& obj, const Expr& slice, const ScopePtr& scope) {
  std::optional<int64_t> bounds[3];
  for (int k = 0; k < 3; ++k) {
    if (!slice.args[static_cast<size_t>(k)]) continue;
    const Value v = eval(*slice.args[static_cast<size_t>(k)], scope);
    if (v.is_integral()) {
      bounds[k] = v.as_int();
    } else if (!v.is_none()) {
      if (obj.is_undefined()) undefined_fail(obj);
      if (folding_) return Value::undefined("slice indices must be integers or None");
      runtime_fail("slice indices must be integers or None or have an __index__ method");
    }
  }
  if (obj.is_undefined()) undefined_fail(obj);
  const int64_t step = bounds[2].value_or(1);
  if (obj.is_list() && obj.list_data().kind == SeqKind::Range) unsupported("slicing a range()");
  if (!obj.is_string() && !indexable_sequence(obj)) {
    if (folding_) return Value::undefined("'" + type_name(obj) + "' object is not subscriptable");
    if (obj.is_dict()) runtime_fail("unhashable type: 'slice'");
    runtime_fail("'", type_name(obj), "' object is not subscriptable");
  }
  if (step == 0) runtime_fail("slice step cannot be zero");
  if (obj.is_string()) {
    const std::u32string cps = unicode::decode(obj.str());
    std::u32string out;
    for (int64_t i :
         slice_positions(static_cast<int64_t>(cps.size()), bounds[0], bounds[1], step)) {
      out += cps[static_cast<size_t>(i)];
    }
    return Value::string(unicode::encode(out), obj.is_markup());
  }
  const ValueList& items = obj.items();
  ValueList out;
  for (int64_t i :
       slice_positions(static_cast<int64_t>(items.size()), bounds[0], bounds[1], step)) {
    out.push_back(items[static_cast<size_t>(i)]);
  }
  return Value::list(std::move(out), obj.list_data().kind);
}

ValueList Interpreter::iterate(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
      return {};
    case Type::List:
      return v.items();
    case Type::Dict: {
      ValueList keys;
      keys.reserve(v.dict().size());
      for (const auto& entry : v.dict().entries()) keys.push_back(entry.first);
      return keys;
    }
    case Type::String: {
      ValueList chars;
      const std::u32string cps = unicode::decode(v.str());
      if (cps.size() > limits_.max_list_items) {
        limit_fail("iterating a string longer than ", limits_.max_list_items, " characters");
      }
      chars.reserve(cps.size());
      for (char32_t c : cps) {
        std::string s;
        unicode::append_utf8(s, c);
        chars.push_back(Value::string(std::move(s)));  // iterating a Markup gives plain str
      }
      return chars;
    }
    case Type::Object:
      if (v.object()->iterable()) {
        ValueList items;
        Value item;
        while (v.object()->next(item)) {
          charge(1);
          if (items.size() >= limits_.max_list_items) {
            limit_fail("sequence longer than ", limits_.max_list_items, " items");
          }
          items.push_back(std::move(item));
        }
        return items;
      }
      break;
    default:
      break;
  }
  runtime_fail("'", type_name(v), "' object is not iterable");
}

}  // namespace deepinfer::tokenizer::jinja
