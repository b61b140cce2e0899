#include "server/request_guard.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace deepinfer::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "name:port" -> "name"; "[v6]:port" -> "[v6]".
std::string without_port(const std::string& host) {
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    return close == std::string::npos ? host : host.substr(0, close + 1);
  }
  const auto colon = host.rfind(':');
  return colon == std::string::npos ? host : host.substr(0, colon);
}

bool listed(const std::vector<std::string>& list, const std::string& value) {
  return std::any_of(list.begin(), list.end(),
                     [&](const std::string& v) { return v == "*" || lower(v) == lower(value); });
}

// Compares without an early exit, so response timing does not leak how much of a key matched.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  const std::string h = lower(host);
  return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
}

std::vector<std::string> effective_allowed_hosts(const ServerOptions& options) {
  if (!options.allowed_hosts.empty()) return options.allowed_hosts;
  if (!is_loopback_host(options.host)) return {};
  std::vector<std::string> names = {"localhost", "127.0.0.1", "[::1]"};
  if (!listed(names, options.host)) names.push_back(lower(options.host));  // e.g. 127.0.0.2
  return names;
}

std::optional<ApiError> check_host(const http::Request& request,
                                   const std::vector<std::string>& allowed) {
  if (allowed.empty()) return std::nullopt;
  const std::string* host = request.header("Host");
  if (host == nullptr || host->empty()) {
    return ApiError(400, "the request has no Host header");
  }
  if (listed(allowed, *host) || listed(allowed, without_port(*host))) return std::nullopt;
  return ApiError(
      400, str_cat("Host '", *host, "' is not allowed (--allowed-hosts: ", joined(allowed), ")"),
      "", "invalid_host");
}

std::optional<ApiError> check_api_key(const http::Request& request, const std::string& key) {
  if (key.empty()) return std::nullopt;
  const std::string* header = request.header("Authorization");
  if (header == nullptr || header->empty()) {
    return ApiError(401, "missing API key: send Authorization: Bearer KEY", "", "invalid_api_key");
  }
  const std::string_view value = *header;
  const auto space = value.find(' ');
  bool ok = false;
  if (space != std::string_view::npos && lower(value.substr(0, space)) == "bearer") {
    std::string_view token = value.substr(space + 1);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    ok = same_secret(token, key);
  }
  if (ok) return std::nullopt;
  return ApiError(401, "incorrect API key provided", "", "invalid_api_key");
}

std::optional<ApiError> check_json_content_type(const http::Request& request) {
  const std::string* type = request.header("Content-Type");
  std::string media = type == nullptr ? "" : lower(type->substr(0, type->find(';')));
  while (!media.empty() && media.back() == ' ') media.pop_back();
  if (media == "application/json") return std::nullopt;
  return ApiError(415,
                  str_cat("the request body must be JSON with Content-Type: application/json (got ",
                          type == nullptr ? std::string("none") : "'" + *type + "'",
                          "); with curl: -H 'Content-Type: application/json'"),
                  "", "unsupported_media_type");
}

bool is_preflight(const http::Request& request) {
  return request.method == "OPTIONS" && request.header("Origin") != nullptr &&
         request.header("Access-Control-Request-Method") != nullptr;
}

std::vector<http::Header> cors_headers(const http::Request& request, const ServerOptions& options) {
  const std::string* origin = request.header("Origin");
  if (origin == nullptr || options.allowed_origins.empty() ||
      !listed(options.allowed_origins, *origin)) {
    return {};
  }
  const bool any = listed(options.allowed_origins, "*") && !options.allow_credentials;
  std::vector<http::Header> headers = {{"Access-Control-Allow-Origin", any ? "*" : *origin}};
  if (!any) headers.push_back({"Vary", "Origin"});
  if (options.allow_credentials) headers.push_back({"Access-Control-Allow-Credentials", "true"});
  return headers;
}

http::Response preflight_response(const http::Request& request, const ServerOptions& options) {
  http::Response res;
  auto headers = cors_headers(request, options);
  const std::string& method = *request.header("Access-Control-Request-Method");
  if (headers.empty() || !listed(options.allowed_methods, method)) {
    res.status = 400;
    res.set_header("Content-Type", "text/plain; charset=utf-8");
    res.body = headers.empty() ? "Disallowed CORS origin" : "Disallowed CORS method";
    return res;
  }
  res.headers = std::move(headers);
  const bool any_method = listed(options.allowed_methods, "*");
  res.set_header("Access-Control-Allow-Methods",
                 any_method ? "GET, POST, OPTIONS" : joined(options.allowed_methods));
  if (const std::string* asked = request.header("Access-Control-Request-Headers")) {
    const bool any_header = listed(options.allowed_headers, "*");
    res.set_header("Access-Control-Allow-Headers",
                   any_header ? *asked : joined(options.allowed_headers));
  }
  res.set_header("Access-Control-Max-Age", "600");
  return res;
}

}  // namespace deepinfer::server
