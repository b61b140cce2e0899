#pragma once
// GPT-2's reversible byte <-> printable character map used by ByteLevel pre-tokenizers,
// normalizers and decoders: printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100.. in order.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer::byte_level {

// The character a byte maps to, as UTF-8 (1 or 2 bytes).
const std::array<std::string, 256>& byte_to_utf8();
// The byte a character maps back to, or -1 when the character is not in the map.
int char_to_byte(char32_t cp);

// Appends the byte-level rendering of `bytes` to out.
void encode(std::string_view bytes, std::string& out);
// Maps a token back to bytes. Returns false (leaving `out` unchanged) when some character is
// outside the map; the ByteLevel decoder then keeps the token's own UTF-8 bytes.
bool decode(std::string_view token, std::string& out);

}  // namespace deepinfer::tokenizer::byte_level
