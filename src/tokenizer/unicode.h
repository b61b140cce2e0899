#pragma once
// UTF-8 and Unicode helpers for the tokenizer: decoding, lossy repair (as Rust's
// String::from_utf8_lossy and Python's errors="replace" do it), character properties with
// the meaning the Rust `tokenizers` crate gives them, and normalization forms via utf8proc.
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer::unicode {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one code point of *valid* UTF-8 starting at text[pos] and advances pos.
inline char32_t next_code_point(std::string_view text, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) {
    pos += 1;
    return b0;
  }
  auto cont = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]) & 0x3Fu; };
  char32_t cp;
  if (b0 < 0xE0) {
    cp = ((b0 & 0x1Fu) << 6) | cont(1);
    pos += 2;
  } else if (b0 < 0xF0) {
    cp = ((b0 & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    pos += 3;
  } else {
    cp = ((b0 & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    pos += 4;
  }
  return cp;
}

// Length in bytes of the UTF-8 sequence starting with lead byte b (valid UTF-8 assumed).
inline size_t sequence_length(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

void append_utf8(std::string& out, char32_t cp);

// Length of the longest prefix of `bytes` that is valid UTF-8.
size_t valid_utf8_prefix(std::string_view bytes);
inline bool is_valid_utf8(std::string_view bytes) {
  return valid_utf8_prefix(bytes) == bytes.size();
}
// Replaces each maximal invalid subsequence with U+FFFD (the Unicode "maximal subpart"
// practice, which both Rust's from_utf8_lossy and Python's errors="replace" follow).
std::string to_valid_utf8(std::string_view bytes);

// True when `bytes` ends with the start of a multi-byte sequence that more bytes could
// still complete (as opposed to ending valid or with a definitely invalid byte).
bool ends_with_incomplete_sequence(std::string_view bytes);

// Rust char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t cp);
// Rust regex `\w` (Alphabetic, marks, decimal digits, connector punctuation, join controls).
bool is_word_char(char32_t cp);
// Rust char::is_numeric (general categories Nd, Nl, No).
bool is_numeric(char32_t cp);
// Unicode punctuation (general category P*), as `tokenizers`' Punctuation pre-tokenizer
// uses it together with ASCII punctuation.
bool is_punctuation(char32_t cp);
// Any mark (Mn, Mc, Me): what StripAccents removes after decomposition.
bool is_mark(char32_t cp);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// Normalizes valid UTF-8 text. Fast path: text whose characters can never change under the
// form is returned unchanged without calling into utf8proc.
std::string normalize(std::string_view text, NormalForm form);
// Per-character full lowercase mapping as Rust's char::to_lowercase (no context rules).
std::string to_lowercase(std::string_view text);

}  // namespace deepinfer::tokenizer::unicode
