#include "tokenizer/normalizers.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    for (const auto& part : parts_) {
      part->normalize(text, start_kept, budget);
      budget.check(text.size(), "normalizer");
    }
  }
  double max_expansion() const override {
    double product = 1.0;
    for (const auto& part : parts_) product *= part->max_expansion();
    return product;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::NormalForm form) : form_(form) {}
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    text = unicode::normalize(text, form_);
  }
  // Compatibility forms reach 11x for one character (U+FDFA, NFKC) but about 3x for text
  // made of them: the warning uses the latter, the budget catches the rest per request.
  double max_expansion() const override { return 3.0; }

 private:
  unicode::NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    text = unicode::to_lowercase(text);
  }
  double max_expansion() const override { return 1.5; }  // U+0130 'İ': 2 bytes -> 3
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::shared_ptr<const Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    std::vector<Match> matches;
    pattern_->find_all(text, matches);
    if (matches.empty()) return;
    if (matches.front().first == 0 && matches.front().second > 0 && content_.empty()) {
      start_kept = false;
    }
    std::string out;
    out.reserve(text.size());
    size_t prev = 0;
    for (const auto& [begin, end] : matches) {
      out.append(text, prev, begin - prev);
      budget.check(out.size() + content_.size(), "normalizer Replace");
      out += content_;
      prev = end;
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }
  // Each match of at least one byte (an empty match: between two bytes) becomes content_.
  double max_expansion() const override {
    return std::max(1.0, static_cast<double>(content_.size() + 1));
  }

 private:
  std::shared_ptr<const Regex> pattern_;
  std::string content_;
};

// Prepend / Append add their string to every non-empty segment.
class AffixNormalizer final : public Normalizer {
 public:
  AffixNormalizer(std::string affix, bool prepend) : affix_(std::move(affix)), prepend_(prepend) {}
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    if (text.empty()) return;
    text = prepend_ ? affix_ + text : text + affix_;
  }

 private:
  std::string affix_;
  bool prepend_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t pos = begin;
        if (!unicode::is_whitespace(unicode::next_code_point(text, pos))) break;
        begin = pos;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!unicode::is_whitespace(unicode::next_code_point(text, pos))) break;
        end = start;
      }
    }
    if (begin > 0) start_kept = false;
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const size_t start = pos;
      const char32_t cp = unicode::next_code_point(text, pos);
      if (!unicode::is_mark(cp)) {
        out.append(text, start, pos - start);
      } else if (out.empty()) {
        start_kept = false;
      }
    }
    text = std::move(out);
  }
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const override {
    std::string out;
    byte_level::encode(text, out);
    text = std::move(out);
  }
  double max_expansion() const override { return 2.0; }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& json, const std::string& source) {
  if (json.is_null()) return nullptr;
  const std::string type = json_type(json, "normalizer", source);
  const std::string where = source + ": normalizer " + type;
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& item : json_array(json, "normalizers", where)) {
      if (auto part = make_normalizer(item, source)) parts.push_back(std::move(part));
    }
    if (parts.empty()) return nullptr;
    if (parts.size() == 1) return std::move(parts.front());
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(json_pattern(json, "pattern", where),
                                               json_string(json, "content", where));
  }
  if (type == "Prepend") {
    return std::make_unique<AffixNormalizer>(json_string(json, "prepend", where), true);
  }
  if (type == "Append") {
    return std::make_unique<AffixNormalizer>(json_string(json, "append", where), false);
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json_bool(json, "strip_left", true, where),
                                             json_bool(json, "strip_right", true, where));
  }
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  fail(source, ": unsupported normalizer type '", type,
       "' (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Append, "
       "Strip, StripAccents, ByteLevel)");
}

}  // namespace deepinfer::tokenizer
