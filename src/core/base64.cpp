#include "core/base64.h"

#include <cstdint>

namespace deepinfer {
namespace {

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

bool decode_base64(std::string_view text, std::string& out) {
  if (text.size() % 4 != 0) return false;
  size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') {
    ++padding;
  }
  const size_t digits = text.size() - padding;
  out.reserve(out.size() + digits * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (size_t i = 0; i < digits; ++i) {
    const int v = sextet(text[i]);
    if (v < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  // The bits left over are padding and must be zero (one encoding per byte string).
  return (bits & ((1u << count) - 1)) == 0;
}

}  // namespace deepinfer
