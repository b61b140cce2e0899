// Sequence filters (jinja2 filters.py). Those that return generators in jinja2 (map, select,
// unique, items, reverse, batch, slice, ...) return single-use Generator objects here too,
// so printing, len() and re-iteration behave as they do in Python.
#include <algorithm>
#include <memory>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/method_args.h"
#include "tokenizer/jinja/objects.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/registry.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

Value get_attribute_path(Interpreter& in, const Value& item, const Value& attribute,
                         const Value* default_value) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    size_t start = 0;
    const std::string& a = attribute.str();
    while (true) {
      const size_t dot = a.find('.', start);
      const std::string part =
          a.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits = !part.empty() && part.size() < 18 &&
                          part.find_first_not_of("0123456789") == std::string::npos;
      parts.push_back(digits ? Value::integer(std::stoll(part)) : Value::string(part));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  } else if (!attribute.is_none()) {
    parts.push_back(attribute);
  }
  Value v = item;
  for (const Value& part : parts) {
    v = in.getitem(v, part);
    if (default_value && !default_value->is_none() && v.is_undefined()) v = *default_value;
  }
  return v;
}

namespace {

Value lowered(const Value& v) {
  return v.is_string() ? Value::string(unicode::lower(v.str())) : v;
}

// A generator over already computed items.
Value list_generator(std::string kind, ValueList items) {
  auto shared = std::make_shared<ValueList>(std::move(items));
  uint32_t depth = 0;
  for (const Value& v : *shared) depth = std::max(depth, v.depth());
  if (depth + 1 > kMaxValueDepth) limit_fail("values nested deeper than ", kMaxValueDepth);
  auto index = std::make_shared<size_t>(0);
  return Value::object(std::make_shared<Generator>(
      std::move(kind),
      [shared, index](Value& out) {
        if (*index >= shared->size()) return false;
        out = (*shared)[(*index)++];
        return true;
      },
      depth + 1));
}

Value first_item(Interpreter& in, const Value& v) {
  if (v.is_object() && v.object()->iterable()) {
    Value out;
    return v.object()->next(out) ? out : Value::undefined("No first item, sequence was empty.");
  }
  if (v.is_string() && !v.str().empty()) {
    const std::u32string cps = unicode::decode(v.str());
    std::string s;
    unicode::append_utf8(s, cps[0]);
    return Value::string(s);  // next(iter(markup)) is a plain str
  }
  if (v.is_list() && !v.items().empty()) return v.items().front();
  if (v.is_dict() && !v.dict().empty()) return v.dict().entries().front().first;
  if (!v.is_undefined() && !v.is_list() && !v.is_dict() && !v.is_string()) in.iterate(v);  // fails
  return Value::undefined("No first item, sequence was empty.");
}

Value f_first(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("first", {});
  return first_item(in, input);
}

Value f_last(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("last", {});
  if (input.is_object()) runtime_fail("'", type_name(input), "' object is not reversible");
  if (!input.is_undefined() && !input.is_list() && !input.is_dict() && !input.is_string()) {
    runtime_fail("'", type_name(input), "' object is not reversible");
  }
  const ValueList items = in.iterate(input);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_list(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("list", {});
  return Value::list(in.iterate(input));
}

Value f_join(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("join", {"d", "attribute"});
  const std::string sep = b[0] ? to_str(*b[0], in.max_size()) : "";
  std::string out;
  bool first = true;
  for (const Value& raw : in.iterate(input)) {
    const Value v = (b[1] && !b[1]->is_none()) ? get_attribute_path(in, raw, *b[1]) : raw;
    if (!first) out += sep;
    first = false;
    out += v.is_string() ? v.str() : to_str(v, in.max_size());
    if (out.size() > in.max_size()) limit_fail("string larger than ", in.max_size(), " bytes");
  }
  return Value::string(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& input, CallArgs& a) {
  a.bind("reverse", {});
  if (input.is_string()) {
    std::u32string cps = unicode::decode(input.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(unicode::encode(cps), input.is_markup());
  }
  ValueList items = in.iterate(input);
  std::reverse(items.begin(), items.end());
  if (input.is_object()) return Value::list(std::move(items));  // list(value); rv.reverse()
  return list_generator("list_reverseiterator", std::move(items));
}

// Sort keys: one per comma-separated attribute (jinja2's make_multi_attrgetter).
ValueList sort_key(Interpreter& in, const Value& item, const Value& attribute,
                   bool case_sensitive) {
  ValueList key;
  if (attribute.is_string() && attribute.str().find(',') != std::string::npos) {
    size_t start = 0;
    const std::string& s = attribute.str();
    while (true) {
      const size_t comma = s.find(',', start);
      Value v = get_attribute_path(in, item, Value::string(s.substr(start, comma - start)));
      key.push_back(case_sensitive ? v : lowered(v));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return key;
  }
  Value v = get_attribute_path(in, item, attribute);
  key.push_back(case_sensitive ? v : lowered(v));
  return key;
}

bool keys_less(const ValueList& x, const ValueList& y) {
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (!python_equal(x[i], y[i])) return python_less(x[i], y[i]);
  }
  return x.size() < y.size();
}

Value sorted(Interpreter& in, ValueList items, const std::function<ValueList(const Value&)>& key,
             bool reverse) {
  std::vector<std::pair<ValueList, Value>> keyed;
  for (auto& item : items) keyed.emplace_back(key(item), std::move(item));
  in.charge(static_cast<int64_t>(keyed.size()) * 4);
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? keys_less(y.first, x.first) : keys_less(x.first, y.first);
  });
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::list(std::move(out));
}

Value f_sort(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = b[0] && b[0]->truthy();
  const bool case_sensitive = b[1] && b[1]->truthy();
  const Value attribute = b[2] ? *b[2] : Value::none();
  return sorted(
      in, in.iterate(input),
      [&](const Value& item) { return sort_key(in, item, attribute, case_sensitive); }, reverse);
}

Value f_dictsort(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("dictsort", {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = b[0] && b[0]->truthy();
  const std::string by = b[1] ? req_str(b[1], "dictsort") : "key";
  if (by != "key" && by != "value")
    runtime_fail("You can only sort by either \"key\" or \"value\"");
  if (!input.is_dict())
    runtime_fail("dictsort: '", type_name(input), "' object has no attribute 'items'");
  ValueList pairs;
  for (const auto& [k, v] : input.dict().entries())
    pairs.push_back(Value::list({k, v}, SeqKind::Tuple));
  const size_t pos = by == "key" ? 0 : 1;
  return sorted(
      in, std::move(pairs),
      [&](const Value& pair) {
        const Value& v = pair.items()[pos];
        return ValueList{case_sensitive ? v : lowered(v)};
      },
      b[2] && b[2]->truthy());
}

Value min_max(Interpreter& in, const Value& input, CallArgs& a, bool want_max) {
  auto b = a.bind(want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool case_sensitive = b[0] && b[0]->truthy();
  const Value attribute = b[1] ? *b[1] : Value::none();
  const ValueList items = in.iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = get_attribute_path(in, items[0], attribute);
  if (!case_sensitive) best_key = lowered(best_key);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = get_attribute_path(in, items[i], attribute);
    if (!case_sensitive) key = lowered(key);
    if (want_max ? python_less(best_key, key) : python_less(key, best_key)) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}
Value f_min(Interpreter& in, const Value& v, CallArgs& a) {
  return min_max(in, v, a, false);
}
Value f_max(Interpreter& in, const Value& v, CallArgs& a) {
  return min_max(in, v, a, true);
}

Value f_sum(Interpreter& in, const Value& input, CallArgs& a) {
  auto b = a.bind("sum", {"attribute", "start"});
  Value total = b[1] ? *b[1] : Value::integer(0);
  if (total.is_string()) runtime_fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : in.iterate(input)) {
    const Value v = (b[0] && !b[0]->is_none()) ? get_attribute_path(in, item, *b[0]) : item;
    total = binary_op(BinOp::Add, total, v, in.max_size(), in.max_items());
  }
  return total;
}

const FilterEntry kFilters[] = {
    {"dictsort", f_dictsort}, {"first", f_first}, {"join", f_join}, {"last", f_last},
    {"list", f_list},         {"max", f_max},     {"min", f_min},   {"reverse", f_reverse},
    {"sort", f_sort},         {"sum", f_sum},
};

}  // namespace

std::span<const FilterEntry> sequence_filters() {
  return kFilters;
}

}  // namespace deepinfer::tokenizer::jinja
