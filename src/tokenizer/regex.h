#pragma once
// Regular expressions of tokenizer.json (written for Oniguruma, which the Rust `tokenizers`
// crate uses) run on PCRE2 with JIT. The few places where the two dialects differ for
// Unicode text are rewritten at compile time (see translate_pattern), and iteration follows
// the onig crate's find_iter exactly, including its rule for empty matches.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::tokenizer {

using Match = std::pair<uint32_t, uint32_t>;  // [begin, end) byte offsets

class Regex {
 public:
  // Compiles an Oniguruma-flavoured pattern; `where` names the file and field for errors.
  static std::shared_ptr<const Regex> compile(std::string_view pattern, const std::string& where);
  // A pattern matching `text` literally (tokenizer.json's {"String": ...} patterns).
  static std::shared_ptr<const Regex> literal(std::string_view text);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every non-overlapping match in `text` (valid UTF-8) to `out`, relative offsets.
  void find_all(std::string_view text, std::vector<Match>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  std::string literal_;  // non-empty: plain substring search, no PCRE2 involved
  bool is_literal_ = false;
  void* code_ = nullptr;  // pcre2_code*
};

// Rewrites Oniguruma constructs whose meaning differs in PCRE2 (\s is White_Space, \w is
// letters, marks, decimal digits and connectors, \h is a hex digit, \uHHHH, a script name
// such as \p{Han} is the Script property) or that PCRE2 lacks (nested classes and class
// intersections such as [\p{L}&&[^\p{Han}]]).
std::string translate_pattern(std::string_view onig_pattern);

}  // namespace deepinfer::tokenizer
