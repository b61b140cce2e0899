// Name lookup over the filter and test tables.
#include "tokenizer/jinja/registry.h"

#include <string_view>

namespace deepinfer::tokenizer::jinja {

namespace {

// Everything jinja2 3.1 registers, so unimplemented names get a "not supported" message.
constexpr std::string_view kJinjaFilters[] = {
    "abs",       "attr",       "batch",       "capitalize", "center",  "count",
    "d",         "default",    "dictsort",    "e",          "escape",  "filesizeformat",
    "first",     "float",      "forceescape", "format",     "groupby", "indent",
    "int",       "join",       "last",        "length",     "list",    "lower",
    "items",     "map",        "min",         "max",        "pprint",  "random",
    "reject",    "rejectattr", "replace",     "reverse",    "round",   "safe",
    "select",    "selectattr", "slice",       "sort",       "string",  "striptags",
    "sum",       "title",      "trim",        "truncate",   "unique",  "upper",
    "urlencode", "urlize",     "wordcount",   "wordwrap",   "xmlattr", "tojson"};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& e : string_filters()) {
    if (name == e.name) return e.fn;
  }
  for (const auto& e : sequence_filters()) {
    if (name == e.name) return e.fn;
  }
  for (const auto& e : lazy_filters()) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

TestFn find_test(std::string_view name) {
  for (const auto& e : all_tests()) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

bool jinja_knows_filter(std::string_view name) {
  for (auto f : kJinjaFilters) {
    if (f == name) return true;
  }
  return false;
}

bool jinja_knows_test(std::string_view name) {
  return find_test(name) != nullptr;
}

}  // namespace deepinfer::tokenizer::jinja
