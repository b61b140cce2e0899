#include "http/request_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/printable.h"
#include "http/http_text.h"

namespace deepinfer::http {
namespace {

// RFC 9110 tchar: the characters of a method or a header name.
bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(c); });
}

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

// Percent-decodes a path. False on a malformed escape or an encoded NUL.
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]);
    const int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return false;
    out.push_back(c);
    i += 2;
  }
  return true;
}

// Splits a comma-separated header value into its trimmed, non-empty elements.
template <typename Fn>
void for_each_element(std::string_view value, Fn fn) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view element = trim_ows(value.substr(0, comma));
    if (!element.empty()) fn(element);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

RequestParser::RequestParser(const Limits& limits) : limits_(limits) {}

void RequestParser::reset() {
  status_ = Status::need_more;
  phase_ = Phase::request_line;
  started_ = false;
  expects_continue_ = false;
  keep_alive_ = true;
  error_status_ = 0;
  error_message_.clear();
  request_ = Request{};
  line_.clear();
  line_bytes_ = 0;
  header_bytes_ = 0;
  trailer_count_ = 0;
  body_pieces_.clear();
  body_bytes_ = 0;
  body_bound_ = 0;
  remaining_ = 0;
}

void RequestParser::append_body(std::string_view bytes) {
  while (!bytes.empty()) {
    if (body_pieces_.empty() || body_pieces_.back().size() >= kBodyPieceBytes) {
      body_pieces_.emplace_back();
    }
    std::string& piece = body_pieces_.back();
    const size_t n = std::min(bytes.size(), kBodyPieceBytes - piece.size());
    piece.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
    body_bytes_ += n;
  }
}

void RequestParser::complete() {
  if (body_pieces_.size() == 1) {
    request_.body = std::move(body_pieces_.front());
  } else if (!body_pieces_.empty()) {
    request_.body.reserve(body_bytes_);
    for (const std::string& piece : body_pieces_) request_.body += piece;
  }
  body_pieces_.clear();
  phase_ = Phase::done;
  status_ = Status::complete;
}

Request RequestParser::take_request() {
  Request out = std::move(request_);
  reset();
  return out;
}

void RequestParser::fail(int status, std::string message) {
  status_ = Status::error;
  error_status_ = status;
  error_message_ = std::move(message);
}

RequestParser::Line RequestParser::take_line(std::string_view data, size_t& pos, size_t limit) {
  const size_t lf = data.find('\n', pos);
  const size_t end = lf == std::string_view::npos ? data.size() : lf;
  const size_t line_end_bytes = lf == std::string_view::npos ? 0 : 1;
  if (line_.size() + (end - pos) + line_end_bytes > limit) return Line::too_long;
  line_.append(data.substr(pos, end - pos));
  pos = end + line_end_bytes;
  if (lf == std::string_view::npos) return Line::partial;
  line_bytes_ = line_.size() + 1;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return Line::complete;
}

size_t RequestParser::feed(std::string_view data) {
  return feed_until(data, false);
}

size_t RequestParser::feed_head(std::string_view data) {
  return feed_until(data, true);
}

size_t RequestParser::feed_until(std::string_view data, bool stop_after_head) {
  size_t pos = 0;
  if (!data.empty() && status_ == Status::need_more) started_ = true;
  while (status_ == Status::need_more && pos < data.size()) {
    if (stop_after_head && headers_complete()) break;
    switch (phase_) {
      case Phase::request_line: {
        // Bounded by its own limit (plus CRLF) and by what is left of the header total.
        const size_t head_left = limits_.max_header_bytes - header_bytes_;
        const size_t limit = std::min(limits_.max_request_line_bytes + 2, head_left);
        const Line got = take_line(data, pos, limit);
        if (got == Line::too_long) {
          if (limit == head_left && head_left < limits_.max_request_line_bytes + 2) {
            fail(431, str_cat("the request head is longer than the limit of ",
                              limits_.max_header_bytes, " bytes"));
          } else {
            fail(414, str_cat("the request line is longer than the limit of ",
                              limits_.max_request_line_bytes, " bytes"));
          }
        }
        if (got != Line::complete) break;
        header_bytes_ += line_bytes_;
        if (line_.size() > limits_.max_request_line_bytes) {
          fail(414, str_cat("the request line is longer than the limit of ",
                            limits_.max_request_line_bytes, " bytes"));
          break;
        }
        // RFC 9112 2.2: empty lines before the request line are ignored.
        if (!line_.empty()) parse_request_line();
        line_.clear();
        break;
      }
      case Phase::headers:
      case Phase::trailers: {
        const bool trailers = phase_ == Phase::trailers;
        const Line got = take_line(data, pos, limits_.max_header_bytes - header_bytes_);
        if (got == Line::too_long) {
          fail(431, str_cat(trailers ? "the trailers are" : "the request head is",
                            " longer than the limit of ", limits_.max_header_bytes, " bytes"));
        }
        if (got != Line::complete) break;
        header_bytes_ += line_bytes_;
        if (line_.empty()) {
          if (trailers) {
            complete();
          } else {
            finish_headers();
          }
          break;
        }
        Header field;
        if (!parse_field_line(field)) break;
        line_.clear();
        if (trailers) {
          // Parsed under the header limits, then dropped: nothing here reads trailers.
          if (++trailer_count_ > limits_.max_header_count) {
            fail(431, str_cat("more than ", limits_.max_header_count, " trailer fields"));
          }
        } else if (request_.headers.size() >= limits_.max_header_count) {
          fail(431, str_cat("more than ", limits_.max_header_count, " header fields"));
        } else {
          request_.headers.push_back(std::move(field));
        }
        break;
      }
      case Phase::body_length:
      case Phase::chunk_data: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - pos));
        append_body(data.substr(pos, n));
        pos += n;
        remaining_ -= n;
        if (remaining_ > 0) break;
        if (phase_ == Phase::chunk_data) {
          phase_ = Phase::chunk_data_cr;
        } else {
          complete();
        }
        break;
      }
      case Phase::chunk_size: {
        const Line got = take_line(data, pos, kMaxChunkSizeLineBytes);
        if (got == Line::too_long) {
          fail(400, str_cat("a chunk-size line is longer than ", kMaxChunkSizeLineBytes, " bytes"));
        }
        if (got != Line::complete) break;
        parse_chunk_size();
        line_.clear();
        break;
      }
      case Phase::chunk_data_cr:
      case Phase::chunk_data_lf: {
        const char c = data[pos++];
        if (c == '\n') {
          phase_ = Phase::chunk_size;
        } else if (c == '\r' && phase_ == Phase::chunk_data_cr) {
          phase_ = Phase::chunk_data_lf;
        } else {
          fail(400, "chunk data is not followed by CRLF");
        }
        break;
      }
      case Phase::done:
        return pos;
    }
  }
  return pos;
}

void RequestParser::parse_request_line() {
  const std::string_view line = line_;
  if (line.find('\r') != std::string_view::npos) return fail(400, "bare CR in the request line");
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, str_cat("malformed request line \"", printable(line.substr(0, 200)),
                             "\" (expected METHOD SP target SP HTTP/1.1)"));
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) {
    return fail(400, str_cat("malformed method \"", printable(method.substr(0, 64)), "\""));
  }
  request_.method = std::string(method);
  const bool version_syntax = version.size() == 8 && version.substr(0, 5) == "HTTP/" &&
                              version[5] >= '0' && version[5] <= '9' && version[6] == '.' &&
                              version[7] >= '0' && version[7] <= '9';
  if (!version_syntax) {
    return fail(400, str_cat("malformed HTTP version \"", printable(version.substr(0, 64)), "\""));
  }
  if (version[5] != '1' || version[7] > '1') {
    return fail(505, str_cat("HTTP version ", version.substr(5), " is not supported (1.0, 1.1)"));
  }
  request_.version_minor = version[7] - '0';
  if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7f;
      })) {
    return fail(400, "the request target is empty or has characters outside visible ASCII");
  }
  request_.target = std::string(target);
  if (target == "*" && method == "OPTIONS") {
    request_.path = "*";
  } else if (target.front() != '/') {
    return fail(400, str_cat("the request target \"", printable(target.substr(0, 200)),
                             "\" does not start with '/'"));
  } else {
    const size_t q = target.find('?');
    if (!percent_decode(target.substr(0, q), request_.path)) {
      return fail(400, str_cat("bad percent-encoding (or %00) in the path \"",
                               printable(target.substr(0, std::min<size_t>(q, 200))), "\""));
    }
    if (q != std::string_view::npos) request_.query = std::string(target.substr(q + 1));
  }
  phase_ = Phase::headers;
}

bool RequestParser::parse_field_line(Header& out) {
  const std::string_view line = line_;
  if (is_ows(line.front())) {
    fail(400, "obsolete line folding (a header line starting with whitespace)");
    return false;
  }
  const size_t colon = line.find(':');
  const std::string_view name = line.substr(0, colon);
  if (colon == std::string_view::npos || !is_token(name)) {
    fail(400, str_cat("malformed header field name \"", printable(name.substr(0, 64)),
                      "\" (a token, then ':' with no whitespace before it)"));
    return false;
  }
  const std::string_view value = trim_ows(line.substr(colon + 1));
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      fail(400, str_cat("header \"", name, "\" has a control character (",
                        c == '\0'   ? "NUL"
                        : c == '\r' ? "bare CR"
                                    : "CTL",
                        ") in its value"));
      return false;
    }
  }
  out.name = std::string(name);
  out.value = std::string(value);
  return true;
}

void RequestParser::finish_headers() {
  const Request& r = request_;
  const bool http11 = r.version_minor == 1;
  int hosts = 0;
  bool has_length = false;
  uint64_t length = 0;
  std::string transfer_encoding;
  bool has_transfer_encoding = false;
  bool close = false;
  bool keep_alive = false;
  for (const Header& h : r.headers) {
    if (iequals(h.name, "host")) {
      ++hosts;
    } else if (iequals(h.name, "content-length")) {
      const std::string& v = h.value;
      if (v.empty() || v.size() > 18 ||
          !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return fail(400, str_cat("Content-Length \"", printable(std::string_view(v).substr(0, 64)),
                                 "\" is not 1 to 18 decimal digits"));
      }
      const uint64_t n = std::stoull(v);
      if (has_length && n != length) return fail(400, "conflicting Content-Length headers");
      has_length = true;
      length = n;
    } else if (iequals(h.name, "transfer-encoding")) {
      if (has_transfer_encoding) transfer_encoding += ",";
      transfer_encoding += h.value;
      has_transfer_encoding = true;
    } else if (iequals(h.name, "connection")) {
      for_each_element(h.value, [&](std::string_view option) {
        if (iequals(option, "close")) close = true;
        if (iequals(option, "keep-alive")) keep_alive = true;
      });
    } else if (iequals(h.name, "expect")) {
      if (iequals(h.value, "100-continue")) expects_continue_ = http11;
    }
  }
  keep_alive_ = !close && (http11 || keep_alive);
  if (http11 && hosts == 0) return fail(400, "an HTTP/1.1 request without a Host header");
  if (hosts > 1) return fail(400, "more than one Host header");
  if (has_length && has_transfer_encoding) {
    return fail(400, "both Content-Length and Transfer-Encoding (request smuggling)");
  }
  if (has_transfer_encoding) {
    if (!iequals(trim_ows(transfer_encoding), "chunked")) {
      return fail(501, str_cat("Transfer-Encoding \"",
                               printable(std::string_view(transfer_encoding).substr(0, 64)),
                               "\" is not supported (only chunked)"));
    }
    phase_ = Phase::chunk_size;
    body_bound_ = static_cast<uint64_t>(limits_.max_body_bytes);
    return;
  }
  if (!has_length) {
    expects_continue_ = false;
    if (r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
      return fail(411, str_cat(r.method, " without Content-Length or chunked Transfer-Encoding"));
    }
    complete();
    return;
  }
  if (length > static_cast<uint64_t>(limits_.max_body_bytes)) {
    expects_continue_ = false;
    return fail(413, str_cat("the body (", length, " bytes) is larger than the limit of ",
                             limits_.max_body_bytes, " bytes"));
  }
  if (length == 0) {
    expects_continue_ = false;
    complete();
    return;
  }
  remaining_ = length;
  body_bound_ = length;
  phase_ = Phase::body_length;
}

void RequestParser::parse_chunk_size() {
  const std::string_view line = line_;
  size_t digits = 0;
  uint64_t size = 0;
  while (digits < line.size() && hex_value(line[digits]) >= 0) {
    if (digits == 16) return fail(400, "a chunk size of more than 16 hex digits");
    size = size * 16 + static_cast<uint64_t>(hex_value(line[digits]));
    ++digits;
  }
  if (digits == 0) return fail(400, "a chunk-size line without a hex size");
  std::string_view rest = line.substr(digits);
  while (!rest.empty() && is_ows(rest.front())) rest.remove_prefix(1);
  if (!rest.empty() && rest.front() != ';') return fail(400, "malformed chunk-size line");
  if (rest.find('\r') != std::string_view::npos) return fail(400, "bare CR in a chunk-size line");
  const uint64_t have = body_bytes_;
  if (size > static_cast<uint64_t>(limits_.max_body_bytes) - have) {
    return fail(413, str_cat("the chunked body is larger than the limit of ",
                             limits_.max_body_bytes, " bytes"));
  }
  if (size == 0) {
    // Trailers are bounded by the header limits afresh.
    header_bytes_ = 0;
    phase_ = Phase::trailers;
    return;
  }
  remaining_ = size;
  phase_ = Phase::chunk_data;
}

}  // namespace deepinfer::http
