#pragma once
// The built-in vocabulary: filters, tests, global functions and the methods of str / dict /
// list values, with Python-style argument binding.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // Binds the arguments to Python parameters `names` (in order); unset ones are nullopt.
  // Fails like Python on unknown keywords, duplicates and too many positionals.
  std::vector<std::optional<Value>> bind(std::string_view function,
                                         std::initializer_list<std::string_view> names) const;
};

// Null when the name is not a filter / test this interpreter provides.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
// Whether jinja2 itself knows the name (then the error says "not supported" rather than
// "no filter named").
bool jinja_knows_filter(std::string_view name);
bool jinja_knows_test(std::string_view name);

// jinja2's default globals (range, dict, namespace, cycler, joiner).
void add_default_globals(Dict& globals);

// A callable implemented in C++ (template globals such as raise_exception).
using NativeFn = Value (*)(Interpreter&, CallArgs&);
Value native_function(std::string name, NativeFn fn);

// Attribute access on str / dict / list values: the bound method, Undefined when the type
// has no such attribute, or an Undefined that fails on use for methods that would mutate
// (jinja2's ImmutableSandboxedEnvironment).
std::optional<Value> builtin_method(const Value& self, const std::string& name);

// Python truth, str() and len() helpers shared by filters.
int64_t python_len(const Value& v);

}  // namespace deepinfer::tokenizer::jinja
