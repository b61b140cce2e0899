#include "tokenizer/jinja/string_literal.h"

#include <cstdio>

#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool decode_string_literal(std::string_view raw, std::string& out, std::string& problem,
                           ErrorKind& kind) {
  out.clear();
  kind = ErrorKind::Syntax;
  size_t i = 0;
  while (i < raw.size()) {
    const char c = raw[i];
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= raw.size()) {
      problem = "\\ at end of string";
      return false;
    }
    const char e = raw[i + 1];
    i += 2;
    if (static_cast<unsigned char>(e) >= 0x80) {
      // jinja2 backslash-replaces non-ASCII characters before unicode-escape decoding, so a
      // backslash before one escapes the backslash of the replacement: "\é" -> "\xe9" text.
      const size_t len = (e & 0xE0) == 0xC0 ? 2 : (e & 0xF0) == 0xE0 ? 3 : 4;
      const std::u32string cp = unicode::decode(raw.substr(i - 1, len));
      const unsigned value = cp.empty() ? 0 : static_cast<unsigned>(cp[0]);
      char buf[16];
      if (value < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", value);
      } else if (value < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", value);
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", value);
      }
      out += buf;
      i += len - 1;
      continue;
    }
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t value = 0;
        for (size_t k = 0; k < digits; ++k) {
          const int h = i + k < raw.size() ? hex_value(raw[i + k]) : -1;
          if (h < 0) {
            problem = std::string("truncated \\") + e + " escape";
            return false;
          }
          value = value * 16 + static_cast<uint32_t>(h);
        }
        i += digits;
        if (value > 0x10FFFF) {
          problem = "illegal Unicode character";
          return false;
        }
        if (value >= 0xD800 && value <= 0xDFFF) {
          kind = ErrorKind::Unsupported;
          problem = "surrogate code points in string literals are not supported";
          return false;
        }
        unicode::append_utf8(out, value);
        break;
      }
      case 'N':
        kind = ErrorKind::Unsupported;
        problem = "\\N{...} escapes are not supported";
        return false;
      default:
        if (e >= '0' && e <= '7') {
          uint32_t value = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7'; ++k) {
            value = value * 8 + static_cast<uint32_t>(raw[i++] - '0');
          }
          unicode::append_utf8(out, value);
        } else {
          out += '\\';  // unknown escapes keep their backslash
          out += e;
        }
    }
  }
  return true;
}

}  // namespace deepinfer::tokenizer::jinja
