#include "tokenizer/unicode.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <utf8proc.h>

#include "core/error.h"

namespace deepinfer::tokenizer::unicode {
namespace {

// Length of the valid sequence at bytes[pos], or 0 with `bad` set to how many bytes form
// the maximal invalid subpart (at least 1) when the sequence is ill-formed.
size_t check_sequence(std::string_view bytes, size_t pos, size_t& bad) {
  const auto at = [&](size_t i) -> int {
    return pos + i < bytes.size() ? static_cast<unsigned char>(bytes[pos + i]) : -1;
  };
  const int b0 = at(0);
  if (b0 < 0x80) return 1;
  size_t need;
  int lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    bad = 1;
    return 0;
  }
  for (size_t i = 1; i < need; ++i) {
    const int b = at(i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      bad = i;
      return 0;
    }
  }
  return need;
}

const utf8proc_property_t& props(char32_t cp) {
  return *utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
}

// A character is "inert" under a normal form when a string made only of inert characters is
// already in that form: combining class 0, never the second half of a canonical composition
// (utf8proc flags those with bit 15 of comb_index; Hangul jamo compose algorithmically), and
// unchanged by the form on its own. The last test needs utf8proc only for the ~2k characters
// with a canonical decomposition (precomposed letters stay under NFC/NFKC), so the table is
// cheap to build; it covers the planes where text lives (below U+30000).
constexpr char32_t kInertTableEnd = 0x30000;

bool basic_inert(char32_t cp, bool compat, bool compose) {
  const auto& p = props(cp);
  if (p.combining_class != 0) return false;
  if (p.comb_index != UINT16_MAX && (p.comb_index & 0x8000)) return false;
  if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return false;
  // Hangul syllables decompose algorithmically (utf8proc lists no mapping for them).
  if (!compose && cp >= 0xAC00 && cp <= 0xD7A3) return false;
  if (p.decomp_seqindex == UINT16_MAX) return true;
  if (compat && p.decomp_type != 0) return false;  // a compatibility mapping applies
  if (p.decomp_type != 0) return true;             // canonical forms ignore it
  if (!compose) return false;
  // Canonical decomposition under NFC/NFKC: inert when it recomposes to itself.
  std::string one;
  append_utf8(one, cp);
  utf8proc_uint8_t* out = nullptr;
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE |
                                                      (compat ? UTF8PROC_COMPAT : 0));
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(one.data()),
                                          static_cast<utf8proc_ssize_t>(one.size()), &out, options);
  const bool same = n == static_cast<utf8proc_ssize_t>(one.size()) &&
                    std::memcmp(out, one.data(), one.size()) == 0;
  std::free(out);
  return same;
}

std::vector<uint64_t> build_inert_table(NormalForm form) {
  const bool compat = form == NormalForm::kNFKC || form == NormalForm::kNFKD;
  const bool compose = form == NormalForm::kNFC || form == NormalForm::kNFKC;
  std::vector<uint64_t> bits(kInertTableEnd / 64, 0);
  for (char32_t cp = 0; cp < kInertTableEnd; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // surrogates never reach here
    if (basic_inert(cp, compat, compose)) bits[cp / 64] |= uint64_t{1} << (cp % 64);
  }
  return bits;
}

// Built on first use of each form, read-only afterwards.
const std::vector<uint64_t>& inert_table(NormalForm form) {
  switch (form) {
    case NormalForm::kNFC: {
      static const auto t = build_inert_table(form);
      return t;
    }
    case NormalForm::kNFD: {
      static const auto t = build_inert_table(form);
      return t;
    }
    case NormalForm::kNFKC: {
      static const auto t = build_inert_table(form);
      return t;
    }
    case NormalForm::kNFKD:
      break;
  }
  static const auto t = build_inert_table(NormalForm::kNFKD);
  return t;
}

bool is_inert(char32_t cp, NormalForm form) {
  if (cp < kInertTableEnd) return (inert_table(form)[cp / 64] >> (cp % 64)) & 1;
  const bool compat = form == NormalForm::kNFKC || form == NormalForm::kNFKD;
  const bool compose = form == NormalForm::kNFC || form == NormalForm::kNFKC;
  return basic_inert(cp, compat, compose);
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t valid_utf8_prefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // Eight ASCII bytes at a time: the common case for code and English text.
    while (pos + 8 <= bytes.size()) {
      uint64_t word;
      __builtin_memcpy(&word, bytes.data() + pos, 8);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= bytes.size()) break;
    size_t bad = 0;
    const size_t n = check_sequence(bytes, pos, bad);
    if (n == 0) return pos;
    pos += n;
  }
  return bytes.size();
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t bad = 0;
    const size_t n = check_sequence(bytes, pos, bad);
    if (n > 0) {
      out.append(bytes.data() + pos, n);
      pos += n;
    } else {
      append_utf8(out, kReplacementChar);
      pos += bad;
    }
  }
  return out;
}

bool ends_with_incomplete_sequence(std::string_view bytes) {
  // The lead byte of an open sequence is at most 3 bytes from the end.
  for (size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    const size_t pos = bytes.size() - back;
    if ((static_cast<unsigned char>(bytes[pos]) & 0xC0) == 0x80) continue;
    size_t bad = 0;
    // check_sequence reports a shortfall as an invalid subpart reaching the end.
    const auto lead = static_cast<unsigned char>(bytes[pos]);
    return lead >= 0xC2 && lead <= 0xF4 && check_sequence(bytes, pos, bad) == 0 &&
           pos + bad == bytes.size();
  }
  return false;
}

bool is_whitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control
  switch (props(cp).category) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      // Other_Alphabetic symbols: circled and squared Latin letters.
      return (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
             (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
  }
}

bool is_numeric(char32_t cp) {
  const auto c = props(cp).category;
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t cp) {
  const auto c = props(cp).category;
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool is_mark(char32_t cp) {
  const auto c = props(cp).category;
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

namespace {

std::string utf8proc_normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  DI_CHECK(n >= 0, "Unicode normalization failed: ", utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  // Normalization never crosses the position before an inert character (a starter that
  // nothing composes with), so only the stretches around other characters go through
  // utf8proc: from the last inert character before them to the next inert one.
  std::string out;
  size_t copied = 0;     // text[0, copied) is already in `out`
  size_t seg_start = 0;  // start of the current segment (its leading inert character)
  bool dirty = false;    // the current segment holds a character that is not inert
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const bool inert = static_cast<unsigned char>(text[pos]) < 0x80
                           ? (++pos, true)
                           : is_inert(next_code_point(text, pos), form);
    if (!inert) {
      dirty = true;
      continue;
    }
    if (dirty) {
      out.append(text, copied, seg_start - copied);
      out += utf8proc_normalize(text.substr(seg_start, start - seg_start), form);
      copied = start;
      dirty = false;
    }
    seg_start = start;
  }
  if (copied == 0 && !dirty) return std::string(text);
  if (dirty) {
    out.append(text, copied, seg_start - copied);
    out += utf8proc_normalize(text.substr(seg_start), form);
  } else {
    out.append(text, copied, std::string_view::npos);
  }
  return out;
}

std::string to_lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++pos;
      continue;
    }
    const char32_t cp = next_code_point(text, pos);
    if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping
      out += "i\xCC\x87";
      continue;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

}  // namespace deepinfer::tokenizer::unicode
