#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/text_budget.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

// Per-thread PCRE2 match state: encode() is const and may run on many threads at once.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Bounded backtracking: a pathological input fails with an error instead of hanging.
    pcre2_set_match_limit(context, 50'000'000);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    if (jit_stack != nullptr) pcre2_jit_stack_free(jit_stack);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  DI_CHECK(state.data != nullptr && state.context != nullptr, "PCRE2: out of memory");
  return state;
}

constexpr std::string_view kWordClass = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
constexpr std::string_view kHexClass = "0-9a-fA-F";

bool is_hex4(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  }
  return s.size() == 4;
}

// Whether PCRE2 knows `name` as a script. Oniguruma reads an unadorned \p{Han} as the Script
// property, PCRE2 (10.40 on) as Script_Extensions, which adds shared characters such as
// U+3001 '、' to Han; spelled \p{sc:Han} PCRE2 means the Script property too.
bool is_script_name(std::string_view name) {
  const std::string probe = "\\p{sc:" + std::string(name) + "}";
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(probe.data()), probe.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  pcre2_code_free(code);
  return code != nullptr;
}

// Appends the PCRE2 form of the escape starting at p[i] == '\\' and returns the index of its
// last character.
size_t translate_escape(std::string_view p, size_t i, bool in_class, std::string& out) {
  if (i + 1 >= p.size()) {
    out += '\\';
    return i;
  }
  const char e = p[i + 1];
  // \s is the White_Space property in Oniguruma; PCRE2's own \s adds U+180E and misses
  // U+0085, so the property is spelled out (it works inside classes too).
  if (e == 's' || e == 'S') {
    out += e == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
    return i + 1;
  }
  std::string_view cls;
  bool negated = false;
  switch (e) {
    case 'w':
      cls = kWordClass;
      break;
    case 'W':
      cls = kWordClass, negated = true;
      break;
    case 'h':
      cls = kHexClass;
      break;
    case 'H':
      cls = kHexClass, negated = true;
      break;
    default:
      break;
  }
  if (!cls.empty()) {
    if (!in_class) {
      out += negated ? "[^" : "[";
      out += cls;
      out += ']';
    } else if (!negated) {
      out += cls;
    } else {
      out += p.substr(i, 2);  // a negated class inside a class: keep PCRE2's meaning
    }
    return i + 1;
  }
  if (e == 'u' && i + 6 <= p.size() && is_hex4(p.substr(i + 2, 4))) {
    out += "\\x{";
    out += p.substr(i + 2, 4);
    out += '}';
    return i + 5;
  }
  if ((e == 'p' || e == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
    const size_t close = p.find('}', i + 3);
    if (close != std::string_view::npos) {
      bool positive = e == 'p';
      std::string_view name = p.substr(i + 3, close - i - 3);
      if (name.starts_with('^')) positive = !positive, name.remove_prefix(1);
      if (is_script_name(name)) {
        out += positive ? "\\p{sc:" : "\\P{sc:";
        out += name;
        out += '}';
        return close;
      }
    }
  }
  out += p.substr(i, 2);
  return i + 1;
}

// Appends the PCRE2 form of the bracket expression starting at p[i] == '[' and returns the
// index of its closing ']'. Oniguruma's nested classes ([a[b]]) and intersections
// ([\p{L}&&[^\p{Han}]]), which PCRE2 10.42 lacks, become lookaheads that test one character:
// (?:(?=B)A) is "a character in both A and B".
size_t translate_class(std::string_view p, size_t i, std::string& out) {
  struct Operand {
    std::string members;              // plain members, already translated
    std::vector<std::string> nested;  // translated nested classes
  };
  std::vector<Operand> operands(1);
  size_t j = i + 1;
  const bool negated = j < p.size() && p[j] == '^';
  if (negated) ++j;
  for (bool first = true; j < p.size(); ++j, first = false) {
    const char c = p[j];
    if (c == ']' && !first) break;  // a ']' right after '[' or '[^' is a literal member
    Operand& operand = operands.back();
    if (c == '\\') {
      j = translate_escape(p, j, /*in_class=*/true, operand.members);
    } else if (c == '[' && j + 1 < p.size() && p[j + 1] == ':' &&
               p.find(":]", j + 2) != std::string_view::npos) {
      // POSIX bracket expressions such as [:alpha:] do not open a nested class.
      const size_t close = p.find(":]", j + 2);
      operand.members += p.substr(j, close + 2 - j);
      j = close + 1;
    } else if (c == '[') {
      std::string inner;
      j = translate_class(p, j, inner);
      operand.nested.push_back(std::move(inner));
    } else if (c == '&' && j + 1 < p.size() && p[j + 1] == '&') {
      operands.emplace_back();
      ++j;
    } else {
      operand.members += c;
    }
  }
  if (j >= p.size()) {  // unterminated: PCRE2 reports it
    out += p.substr(i);
    return p.size() - 1;
  }
  if (operands.size() == 1 && operands[0].nested.empty()) {
    out += negated ? "[^" : "[";
    out += operands[0].members;
    out += ']';
    return j;
  }
  // One character of an operand: a union of its members and nested classes.
  const auto any_of = [](const Operand& operand) {
    std::vector<std::string> parts = operand.nested;
    if (!operand.members.empty()) parts.insert(parts.begin(), "[" + operand.members + "]");
    if (parts.empty()) return std::string("(?s:.)");  // an empty operand restricts nothing
    if (parts.size() == 1) return parts[0];
    std::string joined = "(?:";
    for (size_t k = 0; k < parts.size(); ++k) joined += (k > 0 ? "|" : "") + parts[k];
    return joined + ")";
  };
  std::string expr = "(?:";
  for (size_t k = 1; k < operands.size(); ++k) expr += "(?=" + any_of(operands[k]) + ")";
  expr += any_of(operands[0]) + ")";
  out += negated ? "(?:(?!" + expr + ")(?s:.))" : expr;
  return j;
}

}  // namespace

std::string translate_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\') {
      i = translate_escape(p, i, /*in_class=*/false, out);
    } else if (p[i] == '[') {
      i = translate_class(p, i, out);
    } else {
      out += p[i];
    }
  }
  return out;
}

std::shared_ptr<const Regex> Regex::compile(std::string_view pattern, const std::string& where) {
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  const std::string translated = translate_pattern(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MULTILINE: in Oniguruma's Ruby syntax ^ and $ match at every line boundary.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(where, ": cannot compile regex '", pattern, "': ", reinterpret_cast<char*>(message),
         " at offset ", offset);
  }
  // JIT is an optimization only: without it pcre2_match interprets the pattern.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  re->code_ = code;
  return re;
}

std::shared_ptr<const Regex> Regex::literal(std::string_view text) {
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(text);
  re->literal_ = std::string(text);
  re->is_literal_ = true;
  return re;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void Regex::find_all(std::string_view text, std::vector<Match>& out) const {
  if (is_literal_) {
    if (literal_.empty()) return;  // an empty literal matches nothing in `tokenizers`
    for (size_t pos = text.find(literal_); pos != std::string_view::npos;
         pos = text.find(literal_, pos + literal_.size())) {
      out.emplace_back(checked_offset(pos), checked_offset(pos + literal_.size()));
    }
    return;
  }
  MatchState& state = match_state();
  const auto* code = static_cast<const pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, state.data,
                               state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail("regex '", pattern_, "' failed on a ", text.size(),
           "-byte input: ", reinterpret_cast<char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t start = ovector[0], end = ovector[1];
    // As onig's find_iter: an empty match right where the previous match ended is skipped
    // by stepping one character forward.
    if (start == end && have_last && last_match_end == end) {
      if (last_end >= text.size()) break;
      last_end += unicode::sequence_length(static_cast<unsigned char>(text[last_end]));
      continue;
    }
    last_end = end;
    last_match_end = end;
    have_last = true;
    out.emplace_back(checked_offset(start), checked_offset(end));
  }
}

}  // namespace deepinfer::tokenizer
