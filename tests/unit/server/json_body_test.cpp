// The request body parser (issue #44): the same JSON as nlohmann's parser, in time linear in
// the body (no search over the keys before each insert), with caps that name the object.
#include "server/json_body.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "server/errors.h"

namespace deepinfer::server {
namespace {

using Json = nlohmann::ordered_json;

ApiError error_of(const std::string& body, const JsonBodyLimits& limits = {}) {
  try {
    parse_json_body(body, limits);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.substr(0, 200);
  return ApiError(0, "");
}

std::string object_of_keys(size_t n, const std::string& prefix = "k") {
  std::string body = "{";
  for (size_t i = 0; i < n; ++i) body += (i ? ",\"" : "\"") + prefix + std::to_string(i) + "\":1";
  return body + "}";
}

TEST(JsonBody, SameValueAsNlohmann) {
  // nlohmann's own parser is the reference: order, duplicates (first place, last value),
  // numbers of each kind, nesting, escapes.
  std::string many = object_of_keys(40);
  many.insert(many.size() - 1, ",\"k3\":[1,{\"x\":2}],\"k39\":null");
  for (const std::string& body :
       {std::string(R"({"b": 1, "a": [1, -2, 3.5, 18446744073709551615, true, null], "c": {}})"),
        std::string(R"({"a": 1, "b": 2, "a": {"z": [[]], "y": "\u00e9\n"}})"),
        std::string(R"([{"x": 1}, [], "s", 0])"), std::string("\"text\""), std::string("12"),
        many}) {
    EXPECT_EQ(parse_json_body(body).dump(), Json::parse(body).dump()) << body;
  }
}

TEST(JsonBody, ObjectsOverTheCapNameTheirPathAndTheCap) {
  const JsonBodyLimits limits{128, 1024};
  EXPECT_NO_THROW(parse_json_body(object_of_keys(1024), limits));
  auto e = error_of(object_of_keys(1025), limits);
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(e.message().find("the request body has more than 1024 keys"), std::string::npos)
      << e.message();
  e = error_of(R"({"messages": [], "logit_bias": )" + object_of_keys(100000) + "}", limits);
  EXPECT_EQ(e.param(), "logit_bias");
  EXPECT_NE(e.message().find("'logit_bias' has more than 1024 keys"), std::string::npos)
      << e.message();
  e = error_of(
      R"({"tools": [{"function": {"parameters": {"properties": )" + object_of_keys(2000) + "}}}]}",
      limits);
  EXPECT_EQ(e.param(), "tools");
  EXPECT_NE(e.message().find("'tools[0].function.parameters.properties' has more than 1024"),
            std::string::npos)
      << e.message();
  // Repeating one key does not count as more keys.
  std::string repeated = "{";
  for (int i = 0; i < 5000; ++i) repeated += (i ? "," : "") + std::string("\"a\":1");
  EXPECT_EQ(parse_json_body(repeated + "}", limits).size(), 1u);
}

TEST(JsonBody, NulByteIsInvalidJsonWhereverItIs) {
  for (const std::string& body :
       {std::string("{\"a\": 1}\0{\"b\": 2}", 17), std::string("{\"a\": \"x\0y\"}", 12),
        std::string("{\"a\": 1\0}", 9)}) {
    const auto e = error_of(body);
    EXPECT_EQ(e.code(), "invalid_json");
    EXPECT_NE(e.message().find("NUL"), std::string::npos) << e.message();
  }
  // An escaped NUL is a character like any other.
  EXPECT_EQ(parse_json_body(R"({"a": "x\u0000y"})")["a"].get<std::string>(),
            std::string("x\0y", 3));
}

TEST(JsonBody, DepthIsCapped) {
  EXPECT_NO_THROW(parse_json_body(std::string(128, '[') + std::string(128, ']')));
  EXPECT_EQ(error_of(std::string(129, '[') + std::string(129, ']')).code(), "invalid_json");
}

TEST(JsonBody, ManyKeysParseInLinearTime) {
  // 200 objects of 1000 keys (3.5 MB). The cost ratio against size is checked by the
  // complexity suite (bench/complexity.py); this checks the result.
  std::string body = "[";
  const std::string object = object_of_keys(1000, "some_key_");
  for (int i = 0; i < 200; ++i) body += (i ? "," : "") + object;
  body += "]";
  const auto start = std::chrono::steady_clock::now();
  const Json parsed = parse_json_body(body);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(parsed.size(), 200u);
  EXPECT_EQ(parsed[199].size(), 1000u);
  EXPECT_LT(seconds, 5.0);
  // 200k top-level keys: refused at the cap, before the rest is read.
  const auto refused = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of(object_of_keys(200000)).status(), 400);
  EXPECT_LT(std::chrono::steady_clock::now() - refused, std::chrono::seconds(1));
}

}  // namespace
}  // namespace deepinfer::server
