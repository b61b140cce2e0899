#include "tokenizer/jinja/unicode.h"

#include <utf8proc.h>

#include <cstdlib>

namespace deepinfer::tokenizer::jinja::unicode {

namespace {

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// Unicode Case_Ignorable: Mn, Me, Cf, Lm, Sk and the MidLetter / MidNumLet / Single_Quote
// word-break characters.
bool is_case_ignorable(char32_t c) {
  switch (c) {
    case '\'':
    case '.':
    case ':':
    case 0xB7:
    case 0x387:
    case 0x55F:
    case 0x5F4:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xFE13:
    case 0xFE52:
    case 0xFE55:
    case 0xFF07:
    case 0xFF0E:
    case 0xFF1A:
      return true;
    default:
      break;
  }
  switch (category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      return false;
  }
}

char32_t simple_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

char32_t simple_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}

char32_t simple_title(char32_t c) {
  if (c < 0x80) return simple_upper(c);
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

// Full (multi-character) mappings Python applies that utf8proc's simple ones lack; only the
// ones that occur in ordinary text.
void append_lower(std::u32string& out, const std::u32string& s, size_t i) {
  const char32_t c = s[i];
  if (c == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE -> i + combining dot
    out += U'i';
    out += char32_t{0x307};
    return;
  }
  if (c == 0x3A3) {  // GREEK CAPITAL SIGMA: final form at the end of a word (Final_Sigma)
    size_t j = i;
    while (j > 0 && is_case_ignorable(s[j - 1])) --j;
    bool final_sigma = j > 0 && is_cased(s[j - 1]);
    if (final_sigma) {
      size_t k = i + 1;
      while (k < s.size() && is_case_ignorable(s[k])) ++k;
      final_sigma = k == s.size() || !is_cased(s[k]);
    }
    out += final_sigma ? char32_t{0x3C2} : char32_t{0x3C3};
    return;
  }
  out += simple_lower(c);
}

void append_upper(std::u32string& out, char32_t c) {
  if (c == 0xDF) {  // sharp s
    out += U"SS";
    return;
  }
  out += simple_upper(c);
}

void append_title(std::u32string& out, char32_t c) {
  if (c == 0xDF) {
    out += U"Ss";
    return;
  }
  out += simple_title(c);
}

}  // namespace

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t cp;
    if ((b & 0xE0) == 0xC0) {
      len = 2;
      cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3;
      cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    char32_t cp;
    size_t len;
    if (b < 0x80) {
      cp = b;
      len = 1;
    } else if ((b & 0xE0) == 0xC0) {
      cp = b & 0x1F;
      len = 2;
    } else if ((b & 0xF0) == 0xE0) {
      cp = b & 0x0F;
      len = 3;
    } else {
      cp = b & 0x07;
      len = 4;
    }
    for (size_t k = 1; k < len && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_linebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_cased(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

bool is_lower(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_LL;
}
bool is_upper(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_LU;
}

bool is_alpha(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
         cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO;
}

bool is_decimal(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_ND;
}

bool is_digit(char32_t c) {
  // Decimal digits plus the superscript / subscript digits Python also counts.
  return is_decimal(c) || c == 0xB2 || c == 0xB3 || c == 0xB9 || c == 0x2070 ||
         (c >= 0x2074 && c <= 0x2079) || (c >= 0x2080 && c <= 0x2089);
}

bool is_numeric(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_word(char32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  return is_alpha(c) || is_numeric(c) || is_digit(c);
}

std::string lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(simple_lower(static_cast<unsigned char>(c)));
    return out;
  }
  const std::u32string cps = decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) append_lower(out, cps, i);
  return encode(out);
}

std::string upper(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(simple_upper(static_cast<unsigned char>(c)));
    return out;
  }
  std::u32string out;
  for (char32_t c : decode(s)) append_upper(out, c);
  return encode(out);
}

std::string title(std::string_view s) {
  const std::u32string cps = decode(s);
  std::u32string out;
  bool previous_cased = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (previous_cased) {
      append_lower(out, cps, i);
    } else {
      append_title(out, cps[i]);
    }
    previous_cased = is_cased(cps[i]);
  }
  return encode(out);
}

std::string capitalize(std::string_view s) {
  const std::u32string cps = decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      append_title(out, cps[i]);
    } else {
      append_lower(out, cps, i);
    }
  }
  return encode(out);
}

std::string swapcase(std::string_view s) {
  const std::u32string cps = decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (is_upper(cps[i])) {
      append_lower(out, cps, i);
    } else if (is_lower(cps[i])) {
      append_upper(out, cps[i]);
    } else {
      out += cps[i];
    }
  }
  return encode(out);
}

std::string casefold(std::string_view s) {
  if (is_ascii(s)) return lower(s);
  utf8proc_uint8_t* folded = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                   static_cast<utf8proc_ssize_t>(s.size()), &folded, UTF8PROC_CASEFOLD);
  if (n < 0) return lower(s);
  std::string out(reinterpret_cast<char*>(folded), static_cast<size_t>(n));
  std::free(folded);
  return out;
}

}  // namespace deepinfer::tokenizer::jinja::unicode
