#include "tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

struct Part {
  uint32_t begin, end;
  bool is_match;
};

// Char-predicate patterns match each qualifying character on its own, as in `tokenizers`.
void find_chars(std::string_view text, const std::function<bool(char32_t)>& pred,
                std::vector<Match>& out) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    if (pred(unicode::next_code_point(text, pos))) {
      out.emplace_back(checked_offset(start), checked_offset(pos));
    }
  }
}

using MatchFn = std::function<void(std::string_view, std::vector<Match>&)>;

void split_all(PreTokenized& pieces, const MatchFn& find, SplitBehavior behavior, bool invert) {
  std::vector<Span> out;
  out.reserve(pieces.spans.size() * 4);
  std::vector<Match> matches;
  const std::string_view text = pieces.text;
  for (const Span& span : pieces.spans) {
    matches.clear();
    find(text.substr(span.begin, span.end - span.begin), matches);
    split_span(span, matches, behavior, invert, out);
  }
  pieces.spans = std::move(out);
}

// Rebuilds the buffer with each span's text transformed by `fn(piece, span, out_text)`, within
// `budget` (checked after each span; `fn` checks within a span when it can grow much).
template <typename Fn>
void rewrite(PreTokenized& pieces, const TextBudget& budget, const char* stage, Fn&& fn) {
  PreTokenized next;
  next.text.reserve(pieces.text.size() + pieces.text.size() / 2 + 8);
  next.spans.reserve(pieces.spans.size());
  const std::string_view text = pieces.text;
  for (const Span& span : pieces.spans) {
    const auto begin = checked_offset(next.text.size());
    fn(text.substr(span.begin, span.end - span.begin), span, next.text);
    budget.check(next.text.size(), stage);
    next.spans.push_back({begin, checked_offset(next.text.size()), span.at_start});
  }
  pieces = std::move(next);
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void pre_tokenize(PreTokenized& pieces, const TextBudget& budget) const override {
    for (const auto& part : parts_) {
      part->pre_tokenize(pieces, budget);
      budget.check(pieces.text.size(), "pre-tokenizer");
    }
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::shared_ptr<const Regex> pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PreTokenized& pieces, const TextBudget& budget) const override {
    split_all(
        pieces, [this](std::string_view s, std::vector<Match>& m) { pattern_->find_all(s, m); },
        behavior_, invert_);
  }

 private:
  std::shared_ptr<const Regex> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class CharSplitPreTokenizer final : public PreTokenizer {
 public:
  CharSplitPreTokenizer(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void pre_tokenize(PreTokenized& pieces, const TextBudget& budget) const override {
    split_all(
        pieces, [this](std::string_view s, std::vector<Match>& m) { find_chars(s, pred_, m); },
        behavior_, false);
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

// `Whitespace`: runs of word characters and runs of other non-space characters.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenized& pieces, const TextBudget& budget) const override {
    split_all(
        pieces,
        [](std::string_view s, std::vector<Match>& m) {
          int run = -1;  // 0: word run, 1: other run
          size_t run_start = 0;
          for (size_t pos = 0; pos <= s.size();) {
            int kind = -1;
            const size_t start = pos;
            if (pos < s.size()) {
              const char32_t cp = unicode::next_code_point(s, pos);
              kind = unicode::is_whitespace(cp) ? -1 : unicode::is_word_char(cp) ? 0 : 1;
            } else {
              ++pos;
            }
            if (kind != run) {
              if (run >= 0) m.emplace_back(run_start, start);
              run = kind;
              run_start = start;
            }
          }
        },
        SplitBehavior::kRemoved, true);
  }
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, bool map_bytes)
      : add_prefix_space_(add_prefix_space), map_bytes_(map_bytes) {
    if (use_regex) {
      static const auto gpt2 = Regex::compile(
          "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
          "ByteLevel pre-tokenizer");
      regex_ = gpt2;
    }
  }
  void pre_tokenize(PreTokenized& pieces, const TextBudget& budget) const override {
    if (add_prefix_space_) {
      rewrite(pieces, budget, "pre-tokenizer ByteLevel",
              [](std::string_view piece, const Span&, std::string& out) {
                if (piece.empty() || piece.front() != ' ') out += ' ';
                out += piece;
              });
    }
    if (regex_) {
      split_all(
          pieces, [this](std::string_view s, std::vector<Match>& m) { regex_->find_all(s, m); },
          SplitBehavior::kIsolated, false);
    }
    if (map_bytes_) {
      rewrite(pieces, budget, "pre-tokenizer ByteLevel",
              [](std::string_view piece, const Span&, std::string& out) {
                byte_level::encode(piece, out);
              });
    }
  }

 private:
  bool add_prefix_space_;
  bool map_bytes_;
  std::shared_ptr<const Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        pattern_(Regex::literal(replacement_)) {}
  void pre_tokenize(PreTokenized& pieces, const TextBudget& budget) const override {
    // The replacement is any string of the tokenizer.json: each space may grow a lot.
    rewrite(pieces, budget, "pre-tokenizer Metaspace",
            [&](std::string_view piece, const Span& span, std::string& out) {
              // The check runs after spaces became the replacement, so a leading space counts.
              const bool starts = piece.starts_with(replacement_) || piece.starts_with(' ');
              const bool wanted = scheme_ == PrependScheme::kAlways ||
                                  (scheme_ == PrependScheme::kFirst && span.at_start);
              if (wanted && !starts) out += replacement_;
              for (const char c : piece) {
                if (c == ' ') {
                  budget.check(out.size() + replacement_.size(), "pre-tokenizer Metaspace");
                  out += replacement_;
                } else {
                  out += c;
                }
              }
            });
    if (split_) {
      split_all(
          pieces, [this](std::string_view s, std::vector<Match>& m) { pattern_->find_all(s, m); },
          SplitBehavior::kMergedWithNext, false);
    }
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  std::shared_ptr<const Regex> pattern_;
};

SplitBehavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail(where, ": unknown split behavior '", name, "'");
}

bool is_punctuation_char(char32_t cp) {
  return (cp < 0x80 && ((cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') ||
                        (cp >= '[' && cp <= '`') || (cp >= '{' && cp <= '~'))) ||
         unicode::is_punctuation(cp);
}

}  // namespace

void split_span(const Span& span, const std::vector<Match>& matches, SplitBehavior behavior,
                bool invert, std::vector<Span>& out) {
  const uint32_t len = span.end - span.begin;
  if (len == 0) return;  // the single empty part would be dropped anyway
  auto emit = [&](uint32_t b, uint32_t e) {
    if (b != e) out.push_back({span.begin + b, span.begin + e, span.at_start && b == 0});
  };
  if (behavior == SplitBehavior::kIsolated && !invert) {  // the common case, no copies
    uint32_t prev = 0;
    for (const auto& [b, e] : matches) {
      emit(prev, b);
      emit(b, e);
      prev = e;
    }
    emit(prev, len);
    return;
  }
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  uint32_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != len) parts.push_back({prev, len, invert});

  std::vector<std::pair<uint32_t, uint32_t>> merged;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Part& p : parts) merged.emplace_back(p.begin, p.end);
      break;
    case SplitBehavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match) merged.emplace_back(p.begin, p.end);
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().second = p.end;
        } else {
          merged.emplace_back(p.begin, p.end);
        }
        previous_match = p.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().first = it->begin;
        } else {
          merged.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Part& p : parts) {
        if (p.is_match == previous_match && !merged.empty()) {
          merged.back().second = p.end;
        } else {
          merged.emplace_back(p.begin, p.end);
        }
        previous_match = p.is_match;
      }
      break;
  }
  for (const auto& [b, e] : merged) emit(b, e);
}

bool ends_with_byte_level(const nlohmann::json& json) {
  if (!json.is_object()) return false;
  const auto type = json.value("type", std::string());
  if (type == "ByteLevel") return true;
  if (type == "Sequence") {
    const auto it = json.find("pretokenizers");
    if (it == json.end() || !it->is_array() || it->empty()) return false;
    return ends_with_byte_level(it->back());
  }
  return false;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& json,
                                                 const std::string& source,
                                                 const PreTokenizerOptions& options) {
  if (json.is_null()) return nullptr;
  const std::string type = json_type(json, "pre_tokenizer", source);
  const std::string where = source + ": pre_tokenizer " + type;
  if (type == "Sequence") {
    const auto& items = json_array(json, "pretokenizers", where);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < items.size(); ++i) {
      PreTokenizerOptions inner;
      inner.defer_final_byte_level = options.defer_final_byte_level && i + 1 == items.size();
      if (auto part = make_pre_tokenizer(items[i], source, inner)) parts.push_back(std::move(part));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        json_pattern(json, "pattern", where),
        parse_behavior(json_string(json, "behavior", where), where),
        json_bool(json, "invert", false, where));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(json_bool(json, "add_prefix_space", true, where),
                                                   json_bool(json, "use_regex", true, where),
                                                   !options.defer_final_byte_level);
  }
  if (type == "Digits") {
    const bool individual = json_bool(json, "individual_digits", false, where);
    return std::make_unique<CharSplitPreTokenizer>(
        unicode::is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Metaspace") {
    const std::string replacement = json_string_or(json, "replacement", "\xE2\x96\x81", where);
    DI_CHECK(!replacement.empty(), where, ": empty replacement");
    PrependScheme scheme = PrependScheme::kAlways;
    const std::string name = json_string_or(json, "prepend_scheme", "", where);
    if (name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (name == "never") {
      scheme = PrependScheme::kNever;
    } else if (name.empty() && !json_bool(json, "add_prefix_space", true, where)) {
      scheme = PrependScheme::kNever;
    } else if (!name.empty() && name != "always") {
      fail(where, ": unknown prepend_scheme '", name, "'");
    }
    return std::make_unique<MetaspacePreTokenizer>(replacement, scheme,
                                                   json_bool(json, "split", true, where));
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplitPreTokenizer>(unicode::is_whitespace, SplitBehavior::kRemoved);
  }
  if (type == "Punctuation") {
    return std::make_unique<CharSplitPreTokenizer>(
        is_punctuation_char,
        parse_behavior(json_string_or(json, "behavior", "Isolated", where), where));
  }
  if (type == "CharDelimiterSplit") {
    const std::string delimiter = json_string(json, "delimiter", where);
    return std::make_unique<SplitPreTokenizer>(Regex::literal(delimiter), SplitBehavior::kRemoved,
                                               false);
  }
  fail(source, ": unsupported pre_tokenizer type '", type,
       "' (supported: Sequence, Split, ByteLevel, Digits, Metaspace, Whitespace, "
       "WhitespaceSplit, Punctuation, CharDelimiterSplit)");
}

}  // namespace deepinfer::tokenizer
