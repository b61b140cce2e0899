// Fast path of tokenizer.json reading: locate model.vocab and model.merges with a light
// scanner, parse those two (most of the file) with specialized loops, and give the small
// rest to nlohmann::json. Any surprise returns false and the caller falls back to the
// strict SAX reader, which produces the precise error message.
#include <cstring>

#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

class Cursor {
 public:
  Cursor(const char* begin, const char* end) : p_(begin), end_(end) {}
  const char* pos() const { return p_; }

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    ws();
    return p_ < end_ && *p_ == c;
  }

  // Parses a JSON string (cursor at the opening quote) into out.
  bool string(std::string& out) {
    ws();
    if (p_ >= end_ || *p_ != '"') return false;
    ++p_;
    out.clear();
    while (true) {
      const char* start = p_;
      while (p_ < end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) {
        ++p_;
      }
      out.append(start, p_);
      if (p_ >= end_ || static_cast<unsigned char>(*p_) < 0x20) return false;
      if (*p_ == '"') {
        ++p_;
        return true;
      }
      if (!escape(out)) return false;
    }
  }

  bool skip_string() {
    if (p_ >= end_ || *p_ != '"') return false;
    ++p_;
    while (p_ < end_) {
      const char c = *p_++;
      if (c == '"') return true;
      if (c == '\\') {
        if (p_ >= end_) return false;
        ++p_;
      }
    }
    return false;
  }

  // Skips any value; containers are skipped with a depth counter (strings respected).
  bool skip_value() {
    ws();
    if (p_ >= end_) return false;
    if (*p_ == '"') return skip_string();
    if (*p_ != '{' && *p_ != '[') {
      while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && *p_ != ' ' && *p_ != '\n' &&
             *p_ != '\r' && *p_ != '\t') {
        ++p_;
      }
      return true;
    }
    int depth = 0;
    while (p_ < end_) {
      const char c = *p_;
      if (c == '"') {
        if (!skip_string()) return false;
        continue;
      }
      ++p_;
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (--depth == 0) return true;
      }
    }
    return false;
  }

  bool integer(int64_t& value) {
    ws();
    const char* start = p_;
    value = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9' && p_ - start < 12) {
      value = value * 10 + (*p_ - '0');
      ++p_;
    }
    // Anything else (sign, fraction, exponent, huge) goes to the strict reader.
    return p_ > start &&
           (p_ >= end_ || (*p_ != '.' && *p_ != 'e' && *p_ != 'E' && !(*p_ >= '0' && *p_ <= '9')));
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool hex4(uint32_t& v) {
    if (end_ - p_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex(p_[i]);
      if (h < 0) return false;
      v = v * 16 + static_cast<uint32_t>(h);
    }
    p_ += 4;
    return true;
  }
  bool escape(std::string& out) {
    ++p_;  // the backslash
    if (p_ >= end_) return false;
    const char c = *p_++;
    switch (c) {
      case '"':
        out += '"';
        return true;
      case '\\':
        out += '\\';
        return true;
      case '/':
        out += '/';
        return true;
      case 'b':
        out += '\b';
        return true;
      case 'f':
        out += '\f';
        return true;
      case 'n':
        out += '\n';
        return true;
      case 'r':
        out += '\r';
        return true;
      case 't':
        out += '\t';
        return true;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp)) return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
          p_ += 2;
          if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return false;
        }
        unicode::append_utf8(out, cp);
        return true;
      }
      default:
        return false;
    }
  }

  const char* p_;
  const char* end_;
};

struct Range {
  size_t begin = 0, end = 0;
  bool found = false;
};

bool parse_vocab(const std::string& text, Range r, TokenizerJson& out) {
  Cursor c(text.data() + r.begin, text.data() + r.end);
  if (!c.eat('{')) return false;
  out.vocab.reserve((r.end - r.begin) / 12);
  if (c.eat('}')) return true;
  std::string key;
  do {
    int64_t id;
    if (!c.string(key) || !c.eat(':') || !c.integer(id)) return false;
    out.vocab.emplace_back(key, id);
  } while (c.eat(','));
  return c.eat('}');
}

bool parse_merges(const std::string& text, Range r, TokenizerJson& out) {
  Cursor c(text.data() + r.begin, text.data() + r.end);
  if (!c.eat('[')) return false;
  out.merges.reserve((r.end - r.begin) / 12);
  if (c.eat(']')) return true;
  std::string a, b;
  do {
    if (c.eat('[')) {
      if (!c.string(a) || !c.eat(',') || !c.string(b) || !c.eat(']')) return false;
      out.merges.emplace_back(a, b);
    } else {
      if (!c.string(a)) return false;
      const size_t space = a.find(' ');
      if (space == std::string::npos || a.find(' ', space + 1) != std::string::npos) return false;
      out.merges.emplace_back(a.substr(0, space), a.substr(space + 1));
    }
  } while (c.eat(','));
  return c.eat(']');
}

}  // namespace

bool parse_tokenizer_json_fast(const std::string& text, TokenizerJson& out) {
  Cursor c(text.data(), text.data() + text.size());
  Range vocab, merges;
  std::string key;
  if (!c.eat('{')) return false;
  if (!c.peek('}')) {
    do {
      if (!c.string(key) || !c.eat(':')) return false;
      if (key == "model" && c.eat('{')) {
        if (!c.peek('}')) {
          std::string inner;
          do {
            if (!c.string(inner) || !c.eat(':')) return false;
            c.ws();
            const size_t begin = static_cast<size_t>(c.pos() - text.data());
            if (!c.skip_value()) return false;
            const size_t end = static_cast<size_t>(c.pos() - text.data());
            Range* slot = inner == "vocab" ? &vocab : inner == "merges" ? &merges : nullptr;
            if (slot != nullptr) {
              if (slot->found) return false;  // duplicate keys: let the strict reader decide
              *slot = Range{begin, end, true};
            }
          } while (c.eat(','));
        }
        if (!c.eat('}')) return false;
      } else if (!c.skip_value()) {
        return false;
      }
    } while (c.eat(','));
  }
  if (!c.eat('}')) return false;
  c.ws();
  if (c.pos() != text.data() + text.size()) return false;

  // The document without the two big values, which become empty containers.
  std::string skeleton;
  skeleton.reserve(4096);
  size_t prev = 0;
  Range parts[2] = {vocab, merges};
  if (parts[0].found && parts[1].found && parts[1].begin < parts[0].begin)
    std::swap(parts[0], parts[1]);
  for (const Range& part : parts) {
    if (!part.found) continue;
    skeleton.append(text, prev, part.begin - prev);
    skeleton += text[part.begin] == '{' ? "{}" : "[]";
    prev = part.end;
  }
  skeleton.append(text, prev, std::string::npos);
  out.doc = nlohmann::json::parse(skeleton, nullptr, /*allow_exceptions=*/false);
  if (out.doc.is_discarded() || !out.doc.is_object()) return false;

  if (vocab.found) {
    if (!parse_vocab(text, vocab, out)) return false;
    out.has_vocab = true;
  }
  if (merges.found) {
    if (!parse_merges(text, merges, out)) return false;
    out.has_merges = true;
  }
  // The placeholders must not linger in the document.
  if (auto model = out.doc.find("model"); model != out.doc.end() && model->is_object()) {
    if (vocab.found) model->erase("vocab");
    if (merges.found) model->erase("merges");
  }
  return true;
}

}  // namespace deepinfer::tokenizer
