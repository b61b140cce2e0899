#pragma once
// Small text helpers of the HTTP layer: case-insensitive names, reason phrases, dates, and
// the bytes of a response head.
#include <ctime>
#include <string>
#include <string_view>

#include "http/http_server.h"

namespace deepinfer::http {

// ASCII case-insensitive comparison (header names, tokens such as "chunked").
bool iequals(std::string_view a, std::string_view b);

// The standard reason phrase of a status ("Not Found"); "Unknown" for an unassigned code.
std::string_view reason_phrase(int status);

// An IMF-fixdate (RFC 9110 5.6.7), e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
std::string http_date(std::time_t when);

// How the body after a head is delimited.
enum class Framing {
  length,       // Content-Length: body size
  chunked,      // Transfer-Encoding: chunked
  until_close,  // neither (HTTP/1.0 stream): the body ends when the connection closes
  none,         // 1xx / 204 / 304: no body and no length
};

// "HTTP/1.1 <status> <reason>", the response's own headers (less the ones the server owns:
// Content-Length, Transfer-Encoding, Connection, Date), Date, Server, the framing header and
// "Connection: close" (or "keep-alive" for an HTTP/1.0 client that keeps it), then CRLF.
std::string format_head(const Response& response, Framing framing, size_t content_length,
                        bool close, bool http10_keep_alive);

// The default body of the layer's own errors: {"error": message}.
Response default_error_response(int status, const std::string& message);

}  // namespace deepinfer::http
