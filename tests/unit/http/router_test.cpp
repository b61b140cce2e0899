#include "http/router.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace deepinfer::http {
namespace {

// A handler that records its name in the request's body, so a match can be told apart.
Handler named(std::string name) {
  return [name](Request&& req, std::shared_ptr<Exchange>) { req.body = name; };
}

std::string run(const Router::Match& m) {
  if (m.handler == nullptr) return "";
  Request req;
  // The handler takes the request by rvalue and writes into it; read it back afterwards.
  Request& ref = req;
  (*m.handler)(std::move(ref), nullptr);
  return req.body;
}

Router example() {
  Router r;
  r.add("GET", "/v1/models", named("list"));
  r.add("POST", "/v1/chat/completions", named("chat"));
  r.add("GET", "/health", named("health"));
  r.add("HEAD", "/health", named("health-head"));
  r.add_prefix("GET", "/v1/models/", named("model"));
  r.add_prefix("DELETE", "/v1/models/", named("delete-model"));
  r.add_prefix("GET", "/v1/models/special/", named("special"));
  r.add("POST", "/v1/models/exact", named("exact"));
  return r;
}

TEST(HttpRouter, ExactRoutesMatchTheirMethod) {
  const Router r = example();
  EXPECT_EQ(run(r.match("GET", "/v1/models")), "list");
  EXPECT_EQ(run(r.match("POST", "/v1/chat/completions")), "chat");
  EXPECT_EQ(r.match("GET", "/v1/models").status, 200);
}

TEST(HttpRouter, UnknownPathIs404) {
  const Router r = example();
  const auto m = r.match("GET", "/nope");
  EXPECT_EQ(m.handler, nullptr);
  EXPECT_EQ(m.status, 404);
  EXPECT_EQ(r.match("GET", "/v1/model").status, 404);  // not a prefix match
}

TEST(HttpRouter, WrongMethodIs405WithAllow) {
  const Router r = example();
  auto m = r.match("GET", "/v1/chat/completions");
  EXPECT_EQ(m.handler, nullptr);
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "POST");
  m = r.match("POST", "/v1/models");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "GET, HEAD");
  m = r.match("PUT", "/health");
  EXPECT_EQ(m.allow, "GET, HEAD");  // HEAD once, though added and implied
  m = r.match("OPTIONS", "/v1/models/x");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "GET, HEAD, DELETE");
}

TEST(HttpRouter, HeadUsesTheGetRouteUnlessItHasItsOwn) {
  const Router r = example();
  EXPECT_EQ(run(r.match("HEAD", "/v1/models")), "list");
  EXPECT_EQ(run(r.match("HEAD", "/health")), "health-head");
  EXPECT_EQ(r.match("HEAD", "/v1/chat/completions").status, 405);
}

TEST(HttpRouter, LongestPrefixWinsAndExactWinsOverAnyPrefix) {
  const Router r = example();
  EXPECT_EQ(run(r.match("GET", "/v1/models/qwen")), "model");
  EXPECT_EQ(run(r.match("DELETE", "/v1/models/qwen")), "delete-model");
  EXPECT_EQ(run(r.match("GET", "/v1/models/special/x")), "special");
  // The longest prefix owns the path: DELETE is not among its methods.
  auto m = r.match("DELETE", "/v1/models/special/x");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "GET, HEAD");
  EXPECT_EQ(run(r.match("POST", "/v1/models/exact")), "exact");
  m = r.match("GET", "/v1/models/exact");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "POST");
}

}  // namespace
}  // namespace deepinfer::http
