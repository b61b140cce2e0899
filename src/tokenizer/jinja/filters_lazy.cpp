// The filters jinja2 implements as Python generator functions (map, select, reject,
// selectattr, rejectattr, unique, items, batch, slice). Like those, nothing runs — not even
// the argument checks — until the result is first iterated, the input is pulled item by item
// (so a generator input is consumed only as far as needed), and the result is single-use.
#include <algorithm>
#include <memory>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/method_args.h"
#include "tokenizer/jinja/objects.h"
#include "tokenizer/jinja/registry.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

using Step = std::function<bool(Value&)>;

// Starts the generator's body on first use; `keep` are the values it holds (depth bound).
Value lazy_generator(Interpreter& in, const ValueList& keep,
                     std::function<Step(Interpreter&)> start) {
  uint32_t depth = 0;
  for (const Value& v : keep) depth = std::max(depth, v.depth());
  if (depth + 1 > kMaxValueDepth) limit_fail("values nested deeper than ", kMaxValueDepth);
  auto step = std::make_shared<Step>();
  Interpreter* interp = &in;
  return Value::object(std::make_shared<Generator>(
      "generator",
      [step, start, interp](Value& out) {
        if (!*step) *step = start(*interp);
        return (*step)(out);
      },
      depth + 1));
}

ValueList kept(const Value& input, const CallArgs& a) {
  ValueList out = a.positional;
  for (const auto& [k, v] : a.keyword) out.push_back(v);
  out.push_back(input);
  return out;
}

// Python's iter(value): generators are pulled from, anything else is materialised.
Step iterator_over(Interpreter& in, const Value& v) {
  if (v.is_object() && v.object()->iterable()) {
    auto object = v.object_ptr();
    return [object](Value& out) { return object->next(out); };
  }
  auto items = std::make_shared<ValueList>(in.iterate(v));
  auto index = std::make_shared<size_t>(0);
  return [items, index](Value& out) {
    if (*index >= items->size()) return false;
    out = (*items)[(*index)++];
    return true;
  };
}

Step empty_step() {
  return [](Value&) { return false; };
}

// select / reject / selectattr / rejectattr (jinja2 select_or_reject)
Value select_impl(Interpreter& in, const Value& input, CallArgs& a, bool want, bool by_attr) {
  const CallArgs args = a;
  return lazy_generator(in, kept(input, a), [=](Interpreter& interp) -> Step {
    if (!input.truthy()) return empty_step();
    const char* fn = by_attr ? (want ? "selectattr" : "rejectattr") : (want ? "select" : "reject");
    size_t off = 0;
    Value attribute;
    if (by_attr) {
      if (args.positional.empty()) runtime_fail("Missing parameter for attribute name");
      attribute = args.positional[0];
      off = 1;
    }
    std::optional<std::string> test;
    if (args.positional.size() > off) {
      if (!args.positional[off].is_string()) runtime_fail(fn, ": test name must be a string");
      test = args.positional[off].str();
    }
    CallArgs test_args;
    for (size_t i = off + 1; i < args.positional.size(); ++i) {
      test_args.positional.push_back(args.positional[i]);
    }
    test_args.keyword = args.keyword;
    Step source = iterator_over(interp, input);
    Interpreter* ip = &interp;
    return [=](Value& out) {
      Value item;
      while (source(item)) {
        const Value probe = by_attr ? get_attribute_path(*ip, item, attribute) : item;
        const bool hit = test ? ip->call_test(*test, probe, test_args) : probe.truthy();
        if (hit == want) {
          out = item;
          return true;
        }
      }
      return false;
    };
  });
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, true, false);
}
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, false, false);
}
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, true, true);
}
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, false, true);
}

Value f_map(Interpreter& in, const Value& input, CallArgs& a) {
  const CallArgs args = a;
  return lazy_generator(in, kept(input, a), [=](Interpreter& interp) -> Step {
    if (!input.truthy()) return empty_step();
    std::function<Value(Interpreter&, const Value&)> func;
    const bool by_attribute = args.positional.empty() &&
                              std::any_of(args.keyword.begin(), args.keyword.end(),
                                          [](const auto& kv) { return kv.first == "attribute"; });
    if (by_attribute) {
      Value attribute, fallback = Value::none();
      for (const auto& [k, v] : args.keyword) {
        if (k == "attribute") {
          attribute = v;
        } else if (k == "default") {
          fallback = v;
        } else {
          runtime_fail("Unexpected keyword argument '", k, "'");
        }
      }
      func = [attribute, fallback](Interpreter& ip, const Value& item) {
        return get_attribute_path(ip, item, attribute, &fallback);
      };
    } else {
      if (args.positional.empty()) runtime_fail("map requires a filter argument");
      if (!args.positional[0].is_string()) runtime_fail("map: filter name must be a string");
      const std::string name = args.positional[0].str();
      CallArgs rest;
      rest.positional.assign(args.positional.begin() + 1, args.positional.end());
      rest.keyword = args.keyword;
      func = [name, rest](Interpreter& ip, const Value& item) {
        return ip.call_filter(name, item, rest);
      };
    }
    Step source = iterator_over(interp, input);
    Interpreter* ip = &interp;
    return [=](Value& out) {
      Value item;
      if (!source(item)) return false;
      out = func(*ip, item);
      return true;
    };
  });
}

Value f_unique(Interpreter& in, const Value& input, CallArgs& a) {
  const CallArgs args = a;
  return lazy_generator(in, kept(input, a), [=](Interpreter& interp) -> Step {
    auto b = args.bind("unique", {"case_sensitive", "attribute"});
    const bool case_sensitive = b[0] && b[0]->truthy();
    const Value attribute = b[1] ? *b[1] : Value::none();
    Step source = iterator_over(interp, input);
    auto seen = std::make_shared<ValueList>();
    Interpreter* ip = &interp;
    return [=](Value& out) {
      Value item;
      while (source(item)) {
        Value key = get_attribute_path(*ip, item, attribute);
        if (!case_sensitive && key.is_string()) key = Value::string(unicode::lower(key.str()));
        if (!hashable(key)) runtime_fail("unhashable type: '", type_name(key), "'");
        ip->charge(static_cast<int64_t>(seen->size() / 16));
        if (std::none_of(seen->begin(), seen->end(),
                         [&](const Value& s) { return python_equal(s, key); })) {
          seen->push_back(key);
          out = item;
          return true;
        }
      }
      return false;
    };
  });
}

Value f_items(Interpreter& in, const Value& input, CallArgs& a) {
  const CallArgs args = a;
  return lazy_generator(in, kept(input, a), [=](Interpreter&) -> Step {
    args.bind("items", {});
    if (input.is_undefined()) return empty_step();
    if (!input.is_dict()) runtime_fail("Can only get item pairs from a mapping.");
    auto index = std::make_shared<size_t>(0);
    return [=](Value& out) {
      const auto& entries = input.dict().entries();
      if (*index >= entries.size()) return false;
      const auto& [k, v] = entries[(*index)++];
      out = Value::list({k, v}, SeqKind::Tuple);
      return true;
    };
  });
}

Step list_step(ValueList rows) {
  auto shared = std::make_shared<ValueList>(std::move(rows));
  auto index = std::make_shared<size_t>(0);
  return [shared, index](Value& out) {
    if (*index >= shared->size()) return false;
    out = (*shared)[(*index)++];
    return true;
  };
}

Value f_batch(Interpreter& in, const Value& input, CallArgs& a) {
  const CallArgs args = a;
  return lazy_generator(in, kept(input, a), [=](Interpreter& interp) -> Step {
    auto b = args.bind("batch", {"linecount", "fill_with"});
    const int64_t count = req_int(b[0], "batch");
    if (count <= 0) runtime_fail("batch: linecount must be positive");
    ValueList rows, row;
    for (const Value& item : interp.iterate(input)) {
      if (static_cast<int64_t>(row.size()) == count) {
        rows.push_back(Value::list(std::move(row)));
        row.clear();
      }
      row.push_back(item);
    }
    if (!row.empty()) {
      if (b[1] && !b[1]->is_none()) {
        while (static_cast<int64_t>(row.size()) < count) row.push_back(*b[1]);
      }
      rows.push_back(Value::list(std::move(row)));
    }
    return list_step(std::move(rows));
  });
}

Value f_slice(Interpreter& in, const Value& input, CallArgs& a) {
  const CallArgs args = a;
  return lazy_generator(in, kept(input, a), [=](Interpreter& interp) -> Step {
    auto b = args.bind("slice", {"slices", "fill_with"});
    const int64_t slices = req_int(b[0], "slice");
    if (slices <= 0 || slices > 100000) runtime_fail("slice: invalid number of slices");
    const ValueList seq = interp.iterate(input);
    const auto length = static_cast<int64_t>(seq.size());
    const int64_t per = length / slices, extra = length % slices;
    int64_t offset = 0;
    ValueList out;
    for (int64_t n = 0; n < slices; ++n) {
      const int64_t start = offset + n * per;
      if (n < extra) ++offset;
      const int64_t end = offset + (n + 1) * per;
      ValueList part(seq.begin() + start, seq.begin() + end);
      if (b[1] && !b[1]->is_none() && n >= extra) part.push_back(*b[1]);
      out.push_back(Value::list(std::move(part)));
    }
    return list_step(std::move(out));
  });
}

const FilterEntry kFilters[] = {
    {"batch", f_batch},           {"items", f_items},           {"map", f_map},
    {"reject", f_reject},         {"rejectattr", f_rejectattr}, {"select", f_select},
    {"selectattr", f_selectattr}, {"slice", f_slice},           {"unique", f_unique},
};

}  // namespace

std::span<const FilterEntry> lazy_filters() {
  return kFilters;
}

}  // namespace deepinfer::tokenizer::jinja
