#pragma once
// Request bodies -> JSON in time and memory linear in their size.
//
// nlohmann's own parser inserts each key into an ordered_json object by searching the keys
// before it, so an object of n keys costs n^2/2 comparisons (200k keys: 35 s of CPU). This
// parser appends keys in order and finds duplicates through a hash index per open object, and
// refuses, while it reads, bodies that nest too deep, objects with too many keys, and NUL
// bytes (which nlohmann's lexer takes for the end of the input, ignoring what follows).
#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deepinfer::server {

struct JsonBodyLimits {
  // Values are later converted and rendered recursively (templates, dumps): no real request
  // nests this deep.
  int max_depth = 128;
  // Keys in any one object (logit_bias, a tool's schema, metadata, the body itself). Later
  // stages look keys up and render objects; no real request needs more.
  size_t max_object_keys = 1024;
};

// Parses the raw body. Errors are ApiError 400: `invalid_json` with the parser's message (or
// the depth), and for an object over max_object_keys a message naming the object's path and
// the cap (param: the top-level field it is in).
nlohmann::ordered_json parse_json_body(std::string_view body, const JsonBodyLimits& limits = {});

}  // namespace deepinfer::server
