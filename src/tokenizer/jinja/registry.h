#pragma once
// Filter and test tables, split by theme across files; builtins.cpp-level lookups search them.
#include <span>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/builtins.h"

namespace deepinfer::tokenizer::jinja {

struct FilterEntry {
  const char* name;
  FilterFn fn;
};

struct TestEntry {
  const char* name;
  TestFn fn;
};

std::span<const FilterEntry> string_filters();    // filters.cpp
std::span<const FilterEntry> sequence_filters();  // filters_seq.cpp
std::span<const FilterEntry> lazy_filters();      // filters_lazy.cpp
std::span<const TestEntry> all_tests();           // tests.cpp

// jinja2's make_attrgetter: "a.b.0" looked up item-first, one part at a time.
Value get_attribute_path(Interpreter& in, const Value& item, const Value& attribute,
                         const Value* default_value = nullptr);

}  // namespace deepinfer::tokenizer::jinja
