#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 512> to_byte;  // every mapped character is below U+0200
  Tables() {
    to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp =
          printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      unicode::append_utf8(to_utf8[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_to_utf8() {
  return tables().to_utf8;
}

int char_to_byte(char32_t cp) {
  return cp < 512 ? tables().to_byte[cp] : -1;
}

void encode(std::string_view bytes, std::string& out) {
  const auto& map = tables().to_utf8;
  for (const char c : bytes) out += map[static_cast<unsigned char>(c)];
}

bool decode(std::string_view token, std::string& out) {
  const size_t mark = out.size();
  const auto& to_byte = tables().to_byte;
  for (size_t pos = 0; pos < token.size();) {
    const char32_t cp = unicode::next_code_point(token, pos);
    const int b = cp < 512 ? to_byte[cp] : -1;
    if (b < 0) {
      out.resize(mark);
      return false;
    }
    out.push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace deepinfer::tokenizer::byte_level
