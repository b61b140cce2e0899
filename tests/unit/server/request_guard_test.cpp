#include "server/request_guard.h"

#include <gtest/gtest.h>

namespace deepinfer::server {
namespace {

http::Request request(std::vector<http::Header> headers, std::string method = "GET") {
  http::Request r;
  r.method = std::move(method);
  r.target = r.path = "/v1/models";
  r.headers = std::move(headers);
  return r;
}

TEST(RequestGuard, LoopbackBindAcceptsOnlyLoopbackHostNames) {
  ServerOptions options;  // 127.0.0.1
  const auto allowed = effective_allowed_hosts(options);
  for (const char* host :
       {"localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"}) {
    EXPECT_FALSE(check_host(request({{"Host", host}}), allowed)) << host;
  }
  for (const char* host : {"evil.example", "evil.example:8000", "localhost.evil.example", ""}) {
    const auto error = check_host(request({{"Host", host}}), allowed);
    ASSERT_TRUE(error) << host;
    EXPECT_EQ(error->status(), 400);
  }
  EXPECT_TRUE(check_host(request({}), allowed));  // no Host at all
}

TEST(RequestGuard, PublicBindAcceptsAnyHostUnlessListed) {
  ServerOptions options;
  options.host = "0.0.0.0";
  EXPECT_TRUE(effective_allowed_hosts(options).empty());
  EXPECT_FALSE(check_host(request({{"Host", "anything"}}), effective_allowed_hosts(options)));
  options.allowed_hosts = {"api.example.com"};
  const auto allowed = effective_allowed_hosts(options);
  EXPECT_FALSE(check_host(request({{"Host", "api.example.com:443"}}), allowed));
  EXPECT_TRUE(check_host(request({{"Host", "other.example.com"}}), allowed));
  EXPECT_FALSE(check_host(request({{"Host", "x"}}), {"*"}));
}

TEST(RequestGuard, BearerSchemeIsCaseInsensitiveAndTheKeyIsNot) {
  EXPECT_FALSE(check_api_key(request({}), ""));
  for (const char* value : {"Bearer k3y", "bearer k3y", "BEARER  k3y"}) {
    EXPECT_FALSE(check_api_key(request({{"Authorization", value}}), "k3y")) << value;
  }
  for (const char* value : {"Bearer K3Y", "Bearer k3", "Bearer k3yy", "Basic k3y", "k3y", ""}) {
    const auto error = check_api_key(request({{"Authorization", value}}), "k3y");
    ASSERT_TRUE(error) << value;
    EXPECT_EQ(error->status(), 401);
  }
  EXPECT_EQ(check_api_key(request({}), "k3y")->status(), 401);
}

TEST(RequestGuard, PostBodiesMustBeJson) {
  EXPECT_FALSE(check_json_content_type(request({{"Content-Type", "application/json"}}, "POST")));
  EXPECT_FALSE(check_json_content_type(
      request({{"Content-Type", "Application/JSON; charset=utf-8"}}, "POST")));
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "application/jsonx"}) {
    const auto error = check_json_content_type(request({{"Content-Type", type}}, "POST"));
    ASSERT_TRUE(error) << type;
    EXPECT_EQ(error->status(), 415);
  }
  EXPECT_EQ(check_json_content_type(request({}, "POST"))->status(), 415);
}

TEST(RequestGuard, CorsHeadersOnlyForConfiguredOrigins) {
  ServerOptions options;
  const auto from = [](const char* origin) { return request({{"Origin", origin}}); };
  EXPECT_TRUE(cors_headers(from("http://a.example"), options).empty());
  options.allowed_origins = {"http://a.example"};
  const auto headers = cors_headers(from("http://a.example"), options);
  ASSERT_FALSE(headers.empty());
  EXPECT_EQ(headers[0].name, "Access-Control-Allow-Origin");
  EXPECT_EQ(headers[0].value, "http://a.example");
  EXPECT_TRUE(cors_headers(from("http://b.example"), options).empty());
  options.allowed_origins = {"*"};
  EXPECT_EQ(cors_headers(from("http://b.example"), options)[0].value, "*");
  // With credentials the origin is echoed ("*" is not valid with credentials).
  options.allow_credentials = true;
  EXPECT_EQ(cors_headers(from("http://b.example"), options)[0].value, "http://b.example");
}

TEST(RequestGuard, Preflight) {
  ServerOptions options;
  options.allowed_origins = {"http://a.example"};
  options.allowed_methods = {"POST"};
  auto pre = request({{"Origin", "http://a.example"},
                      {"Access-Control-Request-Method", "POST"},
                      {"Access-Control-Request-Headers", "content-type"}},
                     "OPTIONS");
  ASSERT_TRUE(is_preflight(pre));
  const auto ok = preflight_response(pre, options);
  EXPECT_EQ(ok.status, 200);
  pre.headers[1].value = "DELETE";
  EXPECT_EQ(preflight_response(pre, options).status, 400);
  pre.headers[0].value = "http://evil.example";
  EXPECT_EQ(preflight_response(pre, options).status, 400);
  EXPECT_FALSE(is_preflight(request({{"Origin", "x"}}, "OPTIONS")));
}

}  // namespace
}  // namespace deepinfer::server
