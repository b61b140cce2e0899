#pragma once
// The checks every request passes before a route sees it, as pure functions of the request
// and the options: the Host allow-list (DNS rebinding), the API key, CORS, and the JSON
// content type of POST bodies (a cross-site form cannot post JSON without a preflight).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_server.h"
#include "server/errors.h"
#include "server/server.h"

namespace deepinfer::server {

// The Host names accepted: the options' list, else the loopback names when `host` is loopback,
// else empty (= any).
std::vector<std::string> effective_allowed_hosts(const ServerOptions& options);

// 400 when the Host header is missing or not in `allowed` (empty: any host).
std::optional<ApiError> check_host(const http::Request& request,
                                   const std::vector<std::string>& allowed);

// 401 unless "Authorization: Bearer <key>" (scheme case-insensitive) carries `key`.
std::optional<ApiError> check_api_key(const http::Request& request, const std::string& key);

// 415 unless a body-carrying request declares Content-Type application/json.
std::optional<ApiError> check_json_content_type(const http::Request& request);

// CORS response headers for this request's Origin (none without an Origin, without configured
// origins, or for an origin not allowed).
std::vector<http::Header> cors_headers(const http::Request& request, const ServerOptions& options);
// A CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool is_preflight(const http::Request& request);
// The answer to a preflight: 200 with the Access-Control-Allow-* headers, or 400 when the
// origin (or the asked method) is not allowed.
http::Response preflight_response(const http::Request& request, const ServerOptions& options);

}  // namespace deepinfer::server
