#include "tokenizer/decoders.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& part : parts_) part->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// Tokens whose characters are all in the byte map become those bytes; any other token keeps
// its own UTF-8. The bytes of all tokens are then repaired as one string.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& token : tokens) {
      if (!byte_level::decode(token, bytes)) bytes += token;
    }
    tokens.assign(1, unicode::to_valid_utf8(bytes));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::shared_ptr<const Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<Match> matches;
    for (auto& token : tokens) {
      matches.clear();
      pattern_->find_all(token, matches);
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (const auto& [b, e] : matches) {
        out.append(token, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(token, prev, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  std::shared_ptr<const Regex> pattern_;
  std::string content_;
};

// Runs of "<0xXX>" tokens become their bytes; an invalid run becomes one U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string bytes;
    size_t byte_tokens = 0;
    auto flush = [&] {
      if (byte_tokens == 0) return;
      if (unicode::is_valid_utf8(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < byte_tokens; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      byte_tokens = 0;
    };
    for (auto& token : tokens) {
      int value = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
        value = parse_hex(token[3], token[4]);
      }
      if (value >= 0) {
        bytes.push_back(static_cast<char>(value));
        ++byte_tokens;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parse_hex(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of `content` from every token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    for (auto& token : tokens) {
      size_t begin = 0, end = token.size();
      for (size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0 &&
                         begin + content_.size() <= end;
           ++i) {
        begin += content_.size();
      }
      for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                         token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// The replacement character becomes a space; in the first token it is dropped unless the
// prepend scheme is "never".
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& token = tokens[i];
      for (size_t pos = 0; pos < token.size();) {
        if (token.compare(pos, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_)) out += ' ';
          pos += replacement_.size();
        } else {
          out += token[pos++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i > 0) {
        if (token.compare(0, prefix_.size(), prefix_) == 0) {
          token.erase(0, prefix_.size());
        } else {
          token.insert(0, " ");
        }
      }
      if (cleanup_) token = cleanup(token);
    }
  }

 private:
  static void replace_all(std::string& s, std::string_view from, std::string_view to) {
    for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
      s.replace(pos, from.size(), to);
    }
  }
  // transformers' clean_up_tokenization: spaces before punctuation and contractions.
  static std::string cleanup(std::string s) {
    for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{" .", "."},
                                   {" ?", "?"},
                                   {" !", "!"},
                                   {" ,", ","},
                                   {" ' ", "'"},
                                   {" n't", "n't"},
                                   {" 'm", "'m"},
                                   {" do not", " don't"},
                                   {" 's", "'s"},
                                   {" 've", "'ve"},
                                   {" 're", "'re"}}) {
      replace_all(s, from, to);
    }
    return s;
  }
  std::string prefix_;
  bool cleanup_;
};

class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      const std::string replacement = i + 1 == tokens.size() ? "" : " ";
      std::string out;
      for (size_t pos = 0; pos < token.size();) {
        if (!suffix_.empty() && token.compare(pos, suffix_.size(), suffix_) == 0) {
          out += replacement;
          pos += suffix_.size();
        } else {
          out += token[pos++];
        }
      }
      token = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

}  // namespace

bool is_plain_byte_level(const nlohmann::json& json) {
  return json.is_object() && json.value("type", std::string()) == "ByteLevel";
}

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& json, const std::string& source) {
  if (json.is_null()) return nullptr;
  const std::string type = json_type(json, "decoder", source);
  const std::string where = source + ": decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& item : json_array(json, "decoders", where)) {
      if (auto part = make_decoder(item, source)) parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(json_pattern(json, "pattern", where),
                                            json_string(json, "content", where));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const int64_t start = json_int(json, "start", 0, where);
    const int64_t stop = json_int(json, "stop", 0, where);
    DI_CHECK(start >= 0 && stop >= 0, where, ": start and stop must be >= 0");
    return std::make_unique<StripDecoder>(json_string(json, "content", where),
                                          static_cast<size_t>(start), static_cast<size_t>(stop));
  }
  if (type == "Metaspace") {
    const std::string scheme = json_string_or(json, "prepend_scheme", "", where);
    bool strip_first = scheme != "never";
    if (scheme.empty()) strip_first = json_bool(json, "add_prefix_space", true, where);
    return std::make_unique<MetaspaceDecoder>(
        json_string_or(json, "replacement", "\xE2\x96\x81", where), strip_first);
  }
  if (type == "WordPiece") {
    return std::make_unique<WordPieceDecoder>(json_string_or(json, "prefix", "##", where),
                                              json_bool(json, "cleanup", true, where));
  }
  if (type == "BPEDecoder") {
    return std::make_unique<BpeSuffixDecoder>(json_string_or(json, "suffix", "</w>", where));
  }
  fail(source, ": unsupported decoder type '", type,
       "' (supported: ByteLevel, Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace, "
       "WordPiece, BPEDecoder)");
}

}  // namespace deepinfer::tokenizer
