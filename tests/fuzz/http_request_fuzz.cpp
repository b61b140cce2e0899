// Fuzzes the HTTP request parser. The first byte picks where the rest is split into two
// feeds (and whether the head is fed separately, as the server does), so the fuzzer explores
// requests cut at every position. Any status is a fine outcome for garbage; a crash, a
// sanitizer report, a body beyond the limit, more headers than the limit, or a parser that
// takes bytes after it finished is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/request_parser.h"

namespace {

deepinfer::http::Limits fuzz_limits() {
  deepinfer::http::Limits limits;
  limits.max_request_line_bytes = 256;
  limits.max_header_bytes = 1024;
  limits.max_header_count = 16;
  limits.max_body_bytes = 512;
  return limits;
}

void check(const deepinfer::http::RequestParser& parser, const deepinfer::http::Limits& limits) {
  const auto& r = parser.request();
  if (r.body.size() > static_cast<size_t>(limits.max_body_bytes)) std::abort();
  if (parser.body_bytes() > static_cast<size_t>(limits.max_body_bytes)) std::abort();
  if (r.headers.size() > limits.max_header_count) std::abort();
  using Status = deepinfer::http::RequestParser::Status;
  if (parser.status() == Status::error) {
    const int s = parser.error_status();
    if (s != 400 && s != 411 && s != 413 && s != 414 && s != 431 && s != 501 && s != 505) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const deepinfer::http::Limits limits = fuzz_limits();
  const bool head_first = (data[0] & 0x80) != 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = input.empty() ? 0 : (data[0] & 0x7f) % (input.size() + 1);
  deepinfer::http::RequestParser parser(limits);
  using Status = deepinfer::http::RequestParser::Status;
  // Up to a few pipelined requests, each fed in two pieces.
  std::string_view rest = input;
  size_t split = cut;
  for (int request = 0; request < 4 && !rest.empty(); ++request) {
    size_t used = 0;
    for (const size_t end : {std::min(split, rest.size()), rest.size()}) {
      while (parser.status() == Status::need_more && used < end) {
        const std::string_view piece = rest.substr(used, end - used);
        const size_t n =
            head_first && !parser.headers_complete() ? parser.feed_head(piece) : parser.feed(piece);
        if (n > piece.size()) std::abort();
        if (n == 0 && parser.status() == Status::need_more) std::abort();  // no progress
        check(parser, limits);
        used += n;
      }
    }
    if (parser.status() != Status::complete) return 0;
    if (parser.feed(rest.substr(used)) != 0) std::abort();  // nothing after its end
    if (parser.request().body.size() != parser.body_bytes()) std::abort();
    const deepinfer::http::Request req = parser.take_request();
    if (req.method.empty() || req.path.empty()) std::abort();
    if (req.path.find('\0') != std::string::npos) std::abort();
    rest.remove_prefix(used);
    split = rest.size() / 2;
  }
  return 0;
}
