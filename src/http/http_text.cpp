#include "http/http_text.h"

#include <nlohmann/json.hpp>

#include <array>

namespace deepinfer::http {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x + 32);
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y + 32);
    if (x != y) return false;
  }
  return true;
}

const std::string* Request::header(std::string_view name) const {
  for (const Header& h : headers) {
    if (iequals(h.name, name)) return &h.value;
  }
  return nullptr;
}

void Response::set_header(std::string name, std::string value) {
  for (Header& h : headers) {
    if (iequals(h.name, name)) {
      h.value = std::move(value);
      return;
    }
  }
  headers.push_back({std::move(name), std::move(value)});
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 416:
      return "Range Not Satisfiable";
    case 417:
      return "Expectation Failed";
    case 421:
      return "Misdirected Request";
    case 422:
      return "Unprocessable Content";
    case 426:
      return "Upgrade Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string http_date(std::time_t when) {
  static constexpr std::array<const char*, 7> kDays = {"Sun", "Mon", "Tue", "Wed",
                                                       "Thu", "Fri", "Sat"};
  static constexpr std::array<const char*, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm tm{};
  gmtime_r(&when, &tm);
  char out[40];
  std::snprintf(out, sizeof(out), "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday % 7],
                tm.tm_mday, kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return out;
}

std::string format_head(const Response& response, Framing framing, size_t content_length,
                        bool close, bool http10_keep_alive) {
  std::string head;
  head.reserve(256);
  head += "HTTP/1.1 ";
  head += std::to_string(response.status);
  head += ' ';
  head += reason_phrase(response.status);
  head += "\r\n";
  bool has_server = false;
  for (const Header& h : response.headers) {
    if (iequals(h.name, "content-length") || iequals(h.name, "transfer-encoding") ||
        iequals(h.name, "connection") || iequals(h.name, "date")) {
      continue;
    }
    has_server = has_server || iequals(h.name, "server");
    head += h.name;
    head += ": ";
    head += h.value;
    head += "\r\n";
  }
  head += "Date: ";
  head += http_date(std::time(nullptr));
  head += "\r\n";
  if (!has_server) head += "Server: deepinfer\r\n";
  switch (framing) {
    case Framing::length:
      head += "Content-Length: ";
      head += std::to_string(content_length);
      head += "\r\n";
      break;
    case Framing::chunked:
      head += "Transfer-Encoding: chunked\r\n";
      break;
    case Framing::until_close:
    case Framing::none:
      break;
  }
  if (close) {
    head += "Connection: close\r\n";
  } else if (http10_keep_alive) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  return head;
}

Response default_error_response(int status, const std::string& message) {
  Response response;
  response.status = status;
  response.set_header("Content-Type", "application/json");
  // dump() with replacement: messages quote client bytes, which need not be UTF-8.
  response.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
  return response;
}

}  // namespace deepinfer::http
