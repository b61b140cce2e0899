#include "tokenizer/jinja/lexer.h"

#include <charconv>
#include <cmath>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/string_literal.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

std::string normalize_newlines(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out += in[i];
    }
  }
  // keep_trailing_newline=False: one final newline is dropped.
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(std::move(source)) {}

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < s_.size()) pos = lex_root(pos);
    tokens_.push_back(Token{TokenType::Eof, "", 0, 0, s_.size()});
    return std::move(tokens_);
  }

  std::string& source() { return s_; }

 private:
  [[noreturn]] void error(ErrorKind kind, size_t offset, const std::string& message) {
    int line, column;
    offset_to_position(s_, offset, line, column);
    throw TemplateError(kind, message, line, column);
  }

  bool at(size_t pos, std::string_view text) const {
    return s_.compare(pos, text.size(), text) == 0;
  }

  // Bytes of the Python whitespace character at pos (0 if none).
  size_t space_at(size_t pos) const {
    if (pos >= s_.size()) return 0;
    const auto b = static_cast<unsigned char>(s_[pos]);
    if (b < 0x80) return unicode::is_space(b) ? 1 : 0;
    const size_t len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
    const std::u32string cp = unicode::decode(std::string_view(s_).substr(pos, len));
    return (!cp.empty() && unicode::is_space(cp[0])) ? len : 0;
  }

  size_t skip_spaces(size_t pos) const {
    while (size_t n = space_at(pos)) pos += n;
    return pos;
  }

  static std::string_view rstrip(std::string_view text) {
    const std::u32string cps = unicode::decode(text);
    size_t keep = cps.size();
    while (keep > 0 && unicode::is_space(cps[keep - 1])) --keep;
    size_t bytes = 0;
    for (size_t i = 0; i < keep; ++i) {
      const char32_t c = cps[i];
      bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    return text.substr(0, bytes);
  }

  static bool all_space(std::string_view text) {
    if (text.empty()) return false;
    for (char32_t c : unicode::decode(text)) {
      if (!unicode::is_space(c)) return false;
    }
    return true;
  }

  // jinja2's OptionalLStrip: the text before a tag loses trailing whitespace with `-`, or
  // (lstrip_blocks) its last line when that line is only whitespace before a block tag.
  std::string_view strip_before_tag(std::string_view text, char sign, bool block_like) const {
    if (sign == '-') return rstrip(text);
    if (sign != '+' && block_like) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_space(text.substr(l_pos))) {
        return text.substr(0, l_pos);
      }
    }
    return text;
  }

  void emit_data(std::string_view text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::Data, std::string(text), 0, 0, offset});
  }

  size_t lex_root(size_t pos) {
    size_t q = pos;
    while (true) {
      q = s_.find('{', q);
      if (q == std::string::npos || q + 1 >= s_.size()) {
        emit_data(std::string_view(s_).substr(pos), pos);
        return s_.size();
      }
      const char k = s_[q + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++q;
    }
    const char kind = s_[q + 1];
    const char sign = (q + 2 < s_.size() && (s_[q + 2] == '-' || s_[q + 2] == '+')) ? s_[q + 2] : 0;
    const size_t raw_end = kind == '%' ? match_raw_begin(q) : 0;
    std::string_view text = std::string_view(s_).substr(pos, q - pos);
    emit_data(strip_before_tag(text, sign, kind != '{'), pos);
    line_starting_ = false;
    const size_t after = q + 2 + (sign ? 1 : 0);
    if (raw_end) return lex_raw(raw_end);
    if (kind == '#') return lex_comment(after);
    tokens_.push_back(
        Token{kind == '%' ? TokenType::BlockBegin : TokenType::VariableBegin, "", 0, 0, q});
    return lex_tag(after, kind == '%');
  }

  // End of `{% raw %}` starting at q, or 0.
  size_t match_raw_begin(size_t q) const {
    size_t p = q + 2;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    p = skip_spaces(p);
    if (!at(p, "raw")) return 0;
    p = skip_spaces(p + 3);
    if (at(p, "-%}")) return skip_spaces(p + 3);
    if (at(p, "%}")) return p + 2;
    return 0;
  }

  size_t lex_raw(size_t begin_end) {
    line_starting_ = s_[begin_end - 1] == '\n';
    if (begin_end >= s_.size()) return begin_end;  // jinja2 drops a raw block opened at the end
    for (size_t r = s_.find("{%", begin_end); r != std::string::npos; r = s_.find("{%", r + 1)) {
      size_t p = r + 2;
      char sign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
      p = skip_spaces(p);
      if (!at(p, "endraw")) continue;
      p = skip_spaces(p + 6);
      size_t end;
      if (at(p, "+%}")) {
        end = p + 3;
      } else if (at(p, "-%}")) {
        end = skip_spaces(p + 3);
      } else if (at(p, "%}")) {
        end = p + 2;
        if (end < s_.size() && s_[end] == '\n') ++end;
      } else {
        continue;
      }
      std::string_view body = std::string_view(s_).substr(begin_end, r - begin_end);
      emit_data(strip_before_tag(body, sign, true), begin_end);
      line_starting_ = s_[end - 1] == '\n';
      return end;
    }
    error(ErrorKind::Syntax, begin_end, "missing end of raw directive ({% endraw %})");
  }

  size_t lex_comment(size_t pos) {
    const size_t k = s_.find("#}", pos);
    // jinja2 quirk: a comment opened at the very end of the template is dropped silently.
    if (k == std::string::npos && pos >= s_.size()) return s_.size();
    if (k == std::string::npos) error(ErrorKind::Syntax, pos, "missing end of comment tag (#})");
    const char sign = (k > pos && (s_[k - 1] == '-' || s_[k - 1] == '+')) ? s_[k - 1] : 0;
    size_t end = k + 2;
    if (sign == '-') {
      end = skip_spaces(end);
    } else if (sign == 0 && end < s_.size() && s_[end] == '\n') {
      ++end;  // trim_blocks
    }
    line_starting_ = s_[end - 1] == '\n';
    return end;
  }

  // Tag end at pos, if any: returns the position after it (whitespace control applied).
  size_t match_tag_end(size_t pos, bool block) const {
    if (block) {
      if (at(pos, "+%}")) return pos + 3;
      if (at(pos, "-%}")) return skip_spaces(pos + 3);
      if (at(pos, "%}")) {
        const size_t end = pos + 2;
        return (end < s_.size() && s_[end] == '\n') ? end + 1 : end;  // trim_blocks
      }
      return 0;
    }
    if (at(pos, "-}}")) return skip_spaces(pos + 3);
    if (at(pos, "}}")) return pos + 2;
    return 0;
  }

  size_t lex_tag(size_t pos, bool block) {
    std::string balance;  // expected closing brackets
    while (true) {
      if (pos >= s_.size()) {
        error(ErrorKind::Syntax, pos,
              block ? "unexpected end of template, expected '%}'"
                    : "unexpected end of template, expected '}}'");
      }
      if (balance.empty()) {
        if (size_t end = match_tag_end(pos, block)) {
          tokens_.push_back(
              Token{block ? TokenType::BlockEnd : TokenType::VariableEnd, "", 0, 0, pos});
          line_starting_ = s_[end - 1] == '\n';
          return end;
        }
      }
      if (space_at(pos)) {
        pos = skip_spaces(pos);
        continue;
      }
      const char c = s_[pos];
      if (size_t end = match_float(pos)) {
        push_float(pos, end);
        pos = end;
      } else if (size_t end = match_integer(pos)) {
        push_integer(pos, end);
        pos = end;
      } else if (is_name_start(c)) {
        size_t end = pos;
        while (end < s_.size() && is_name_char(s_[end])) ++end;
        tokens_.push_back(Token{TokenType::Name, s_.substr(pos, end - pos), 0, 0, pos});
        pos = end;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else if (static_cast<unsigned char>(c) >= 0x80) {
        const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        const std::u32string cp = unicode::decode(std::string_view(s_).substr(pos, len));
        if (!cp.empty() && unicode::is_word(cp[0])) {
          error(ErrorKind::Unsupported, pos, "non-ASCII identifiers are not supported");
        }
        error(ErrorKind::Syntax, pos, "unexpected character '" + s_.substr(pos, len) + "'");
      } else {
        pos = lex_operator(pos, balance);
      }
    }
  }

  // (\d+_)*\d+ at pos: end position or npos.
  size_t digit_run(size_t p) const {
    if (p >= s_.size() || !is_digit(s_[p])) return std::string::npos;
    while (true) {
      while (p < s_.size() && is_digit(s_[p])) ++p;
      if (p + 1 < s_.size() && s_[p] == '_' && is_digit(s_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  size_t match_float(size_t pos) const {
    if (pos > 0 && s_[pos - 1] == '.') return 0;  // (?<!\.)
    const size_t a = digit_run(pos);
    if (a == std::string::npos) return 0;
    size_t r = a;
    if (r < s_.size() && s_[r] == '.') {
      const size_t f = digit_run(r + 1);
      if (f != std::string::npos) r = f;
    }
    if (r < s_.size() && (s_[r] == 'e' || s_[r] == 'E')) {
      size_t t = r + 1;
      if (t < s_.size() && (s_[t] == '+' || s_[t] == '-')) ++t;
      const size_t e = digit_run(t);
      if (e != std::string::npos) return e;
    }
    if (r != a) return r;  // fraction without exponent
    return 0;
  }

  size_t match_integer(size_t pos) const {
    if (!is_digit(s_[pos])) return 0;
    auto prefixed = [&](size_t p, auto digit_ok) -> size_t {
      size_t q = p;
      while (true) {
        size_t t = q;
        if (t < s_.size() && s_[t] == '_') ++t;
        if (t < s_.size() && digit_ok(s_[t])) {
          q = t + 1;
        } else {
          break;
        }
      }
      return q == p ? 0 : q;
    };
    if (s_[pos] == '0' && pos + 1 < s_.size()) {
      const char x = static_cast<char>(s_[pos + 1] | 0x20);
      size_t end = 0;
      if (x == 'b') end = prefixed(pos + 2, [](char c) { return c == '0' || c == '1'; });
      if (x == 'o') end = prefixed(pos + 2, [](char c) { return c >= '0' && c <= '7'; });
      if (x == 'x') {
        end = prefixed(pos + 2, [](char c) {
          return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
        });
      }
      if (end) return end;
    }
    if (s_[pos] != '0') return prefixed(pos, [](char c) { return is_digit(c); });
    const size_t zeros = prefixed(pos + 1, [](char c) { return c == '0'; });
    return zeros ? zeros : pos + 1;
  }

  void push_integer(size_t pos, size_t end) {
    std::string digits;
    for (size_t i = pos; i < end; ++i) {
      if (s_[i] != '_') digits += s_[i];
    }
    int base = 10;
    size_t start = 0;
    if (digits.size() > 1 && digits[0] == '0') {
      const char x = static_cast<char>(digits[1] | 0x20);
      base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
      if (base != 10) start = 2;
    }
    int64_t value = 0;
    auto res = std::from_chars(digits.data() + start, digits.data() + digits.size(), value, base);
    if (res.ec != std::errc()) {
      error(ErrorKind::Unsupported, pos, "integer literal beyond 64 bits");
    }
    tokens_.push_back(Token{TokenType::Integer, s_.substr(pos, end - pos), value, 0, pos});
  }

  void push_float(size_t pos, size_t end) {
    std::string digits;
    for (size_t i = pos; i < end; ++i) {
      if (s_[i] != '_') digits += s_[i];
    }
    double value = 0;
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (res.ec == std::errc::result_out_of_range) {
      // Python's float() gives inf for overflow and 0.0 for underflow.
      const size_t e = digits.find_first_of("eE");
      const bool negative_exp =
          e != std::string::npos && e + 1 < digits.size() && digits[e + 1] == '-';
      value = negative_exp ? 0.0 : HUGE_VAL;
    }
    tokens_.push_back(Token{TokenType::Float, s_.substr(pos, end - pos), 0, value, pos});
  }

  size_t lex_string(size_t pos) {
    const char quote = s_[pos];
    size_t p = pos + 1;
    while (p < s_.size() && s_[p] != quote) p += s_[p] == '\\' ? 2 : 1;
    if (p >= s_.size()) error(ErrorKind::Syntax, pos, "unterminated string literal");
    std::string decoded;
    std::string problem;
    ErrorKind kind = ErrorKind::Syntax;
    if (!decode_string_literal(std::string_view(s_).substr(pos + 1, p - pos - 1), decoded, problem,
                               kind)) {
      error(kind, pos, problem);
    }
    tokens_.push_back(Token{TokenType::String, std::move(decoded), 0, 0, pos});
    return p + 1;
  }

  size_t lex_operator(size_t pos, std::string& balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (at(pos, op)) {
        tokens_.push_back(Token{TokenType::Operator, op, 0, 0, pos});
        return pos + 2;
      }
    }
    const char c = s_[pos];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      error(ErrorKind::Syntax, pos, std::string("unexpected character '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) error(ErrorKind::Syntax, pos, std::string("unexpected '") + c + "'");
      if (balance.back() != c) {
        error(ErrorKind::Syntax, pos,
              std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      }
      balance.pop_back();
    }
    tokens_.push_back(Token{TokenType::Operator, std::string(1, c), 0, 0, pos});
    return pos + 1;
  }

  std::string s_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;
};

}  // namespace

void offset_to_position(std::string_view source, size_t offset, int& line, int& column) {
  line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const size_t end = std::min(offset, source.size());
  column = 1 + static_cast<int>(unicode::length(source.substr(line_start, end - line_start)));
}

LexResult lex(std::string_view source) {
  if (!unicode::valid_utf8(source)) {
    throw TemplateError(ErrorKind::Syntax, "template is not valid UTF-8", 0, 0);
  }
  Lexer lexer(normalize_newlines(source));
  LexResult result;
  result.tokens = lexer.run();
  result.source = std::move(lexer.source());
  return result;
}

}  // namespace deepinfer::tokenizer::jinja
