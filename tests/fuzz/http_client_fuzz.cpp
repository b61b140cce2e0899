// Fuzzes the bench client's response parsing (src/http/client.h): the response head, the
// chunked decoder and the SSE parser. The first byte picks the parser and where the rest is
// split into two feeds. Beyond "no crash": a parser fed in two pieces must give exactly what it
// gives fed at once (the same bytes, the same events, or an error in both), since a socket may
// cut a response anywhere.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "http/client.h"

namespace {

using deepinfer::Error;
namespace http = deepinfer::http;

// The decoded body, or nullopt when the decoder threw.
std::optional<std::string> decode_chunked(std::string_view a, std::string_view b) {
  http::ChunkedDecoder decoder;
  std::string out;
  try {
    for (std::string_view piece : {a, b}) {
      while (!piece.empty() && !decoder.done()) {
        const size_t used = decoder.feed(piece, out);
        if (used == 0) break;
        piece.remove_prefix(used);
      }
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  return out + (decoder.done() ? "|done" : "|open");
}

std::string sse_events(std::string_view a, std::string_view b) {
  http::SseParser parser;
  std::string out;
  for (const std::string_view piece : {a, b}) {
    for (const auto& e : parser.feed(piece)) out += e.event + '\x01' + e.data + '\x02';
  }
  return out;
}

std::optional<size_t> head_length(std::string_view bytes) {
  size_t consumed = 0;
  try {
    const auto head = http::parse_response_head(bytes, consumed);
    if (!head) return std::nullopt;
    if (consumed > bytes.size()) std::abort();
    return consumed;
  } catch (const Error&) {
    return SIZE_MAX;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t split = all.empty() ? 0 : (data[0] >> 2) % (all.size() + 1);
  const std::string_view a = all.substr(0, split), b = all.substr(split);
  switch (data[0] & 3) {
    case 0:
    case 1:
      if (decode_chunked(all, {}) != decode_chunked(a, b)) std::abort();
      break;
    case 2:
      if (sse_events(all, {}) != sse_events(a, b)) std::abort();
      break;
    default: {
      // A head found in a prefix is the same head in the whole input.
      const auto whole = head_length(all);
      const auto prefix = head_length(a);
      if (prefix && *prefix != SIZE_MAX && whole != prefix) std::abort();
      break;
    }
  }
  return 0;
}
