#include "tokenizer/jinja/json_value.h"

#include "core/error.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

template <typename Json>
Value convert(const Json& j, uint32_t depth) {
  if (depth > kMaxValueDepth) fail("JSON input nested deeper than ", kMaxValueDepth, " levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) fail("JSON integer ", u, " is beyond 64-bit range");
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: {
      const auto& s = j.template get_ref<const std::string&>();
      if (!unicode::valid_utf8(s)) fail("JSON string is not valid UTF-8");
      return Value::string(s);
    }
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(convert(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!unicode::valid_utf8(it.key())) fail("JSON object key is not valid UTF-8");
        d.set(Value::string(it.key()), convert(it.value(), depth + 1));
      }
      return Value::dict(std::move(d));
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  fail("unsupported JSON value (binary)");
}

template <typename Json>
Value convert_top(const Json& j) {
  try {
    return convert(j, 1);
  } catch (const Failure& f) {
    fail(f.message);
  }
}

}  // namespace

Value from_json(const nlohmann::json& j) {
  return convert_top(j);
}
Value from_json(const nlohmann::ordered_json& j) {
  return convert_top(j);
}

}  // namespace deepinfer::tokenizer::jinja
