#pragma once
// Error messages quote names and bytes read from files, which may be binary: printable()
// keeps ASCII 0x20..0x7e and writes every other byte as \xNN.
#include <string>
#include <string_view>

namespace deepinfer {

inline std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
    }
  }
  return out;
}

}  // namespace deepinfer
