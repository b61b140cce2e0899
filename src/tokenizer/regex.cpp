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

}  // namespace

std::string translate_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  int class_depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      // \s is the White_Space property in Oniguruma; PCRE2's own \s adds U+180E and
      // misses U+0085, so the property is spelled out (it works inside classes too).
      if (e == 's' || e == 'S') {
        out += e == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
        ++i;
        continue;
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
        if (class_depth == 0) {
          out += negated ? "[^" : "[";
          out += cls;
          out += ']';
        } else if (!negated) {
          out += cls;
        } else {
          out += p.substr(i, 2);  // a negated class inside a class: keep PCRE2's meaning
        }
        ++i;
        continue;
      }
      if (e == 'u' && i + 6 <= p.size() && is_hex4(p.substr(i + 2, 4))) {
        out += "\\x{";
        out += p.substr(i + 2, 4);
        out += '}';
        i += 5;
        continue;
      }
      out += c;
      out += e;
      ++i;
      continue;
    }
    if (c == '[') {
      // POSIX bracket expressions such as [:alpha:] do not open a nested class.
      if (class_depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {
        const size_t close = p.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out += p.substr(i, close + 2 - i);
          i = close + 1;
          continue;
        }
      }
      ++class_depth;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out += c;
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
