#include "tokenizer/tokenizer_json.h"

#include "core/error.h"
#include "core/text_file.h"

namespace deepinfer::tokenizer {
namespace {

using json = nlohmann::json;

// SAX handler: builds a DOM for everything except the two big model arrays.
class Handler final : public nlohmann::json_sax<json> {
 public:
  Handler(TokenizerJson& out, const std::string& source) : out_(out), source_(source) {}

  bool null() override { return value(json()); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return number(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return number(v > static_cast<number_unsigned_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (mode_ != Mode::kDom) return bad_entry("a number that is not an integer");
    return value(json(v));
  }
  bool string(string_t& v) override {
    switch (mode_) {
      case Mode::kDom:
        return value(json(std::move(v)));
      case Mode::kVocab:
        return bad_entry("a string where a token id was expected");
      case Mode::kMerges: {
        // Old format: "left right", split at the one space.
        const size_t space = v.find(' ');
        if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos) {
          return fail_entry(str_cat("model.merges[", out_.merges.size(), "]: '", v,
                                    "' is not two tokens separated by one space"));
        }
        out_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
        return true;
      }
      case Mode::kMergePair:
        pair_.push_back(std::move(v));
        return true;
    }
    return true;
  }
  bool binary(binary_t&) override { return value(json()); }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) return bad_entry("an object");
    if (is_model_field("vocab")) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    return open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) return bad_entry("an array");
    if (is_model_field("merges")) {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) {
        return fail_entry(str_cat("model.merges[", out_.merges.size(),
                                  "]: expected a pair of two token strings"));
      }
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = str_cat(source_, ": malformed JSON: ", e.what());
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool is_model_field(const char* name) const {
    return stack_.size() == 2 && stack_[1] == model_ && key_ == name;
  }
  bool number(int64_t v) {
    if (mode_ == Mode::kVocab) {
      if (v < 0) return fail_entry(str_cat("model.vocab: token '", vocab_key_, "' has a bad id"));
      out_.vocab.emplace_back(std::move(vocab_key_), v);
      return true;
    }
    if (mode_ != Mode::kDom) return bad_entry("a number");
    return value(json(v));
  }
  json* insert(json&& v) {
    if (stack_.empty()) {
      out_.doc = std::move(v);
      return &out_.doc;
    }
    json& top = *stack_.back();
    if (top.is_object()) {
      json& slot = top[key_];
      slot = std::move(v);
      return &slot;
    }
    top.push_back(std::move(v));
    return &top.back();
  }
  bool value(json&& v) {
    if (mode_ != Mode::kDom) return bad_entry("an unexpected value");
    insert(std::move(v));
    return true;
  }
  bool open(json&& container) {
    const bool is_model = stack_.size() == 1 && key_ == "model";
    json* slot = insert(std::move(container));
    if (is_model) model_ = slot;
    stack_.push_back(slot);
    return true;
  }
  bool bad_entry(const char* what) {
    const char* where = mode_ == Mode::kVocab ? "model.vocab" : "model.merges";
    return fail_entry(str_cat(where, ": unexpected ", what));
  }
  bool fail_entry(const std::string& message) {
    error_ = str_cat(source_, ": ", message);
    return false;
  }

  TokenizerJson& out_;
  const std::string& source_;
  std::vector<json*> stack_;
  json* model_ = nullptr;
  std::string key_;
  std::string vocab_key_;
  std::vector<std::string> pair_;
  Mode mode_ = Mode::kDom;
  std::string error_;
};

}  // namespace

TokenizerJson parse_tokenizer_json(const std::string& text, const std::string& source) {
  {
    TokenizerJson fast;
    if (parse_tokenizer_json_fast(text, fast)) return fast;
  }
  TokenizerJson out;
  Handler handler(out, source);
  const bool ok = json::sax_parse(text, &handler);
  if (!ok) {
    fail(handler.error().empty() ? source + ": malformed JSON" : handler.error());
  }
  DI_CHECK(out.doc.is_object(), source, ": expected a JSON object at the top level");
  return out;
}

TokenizerJson read_tokenizer_json(const std::string& path) {
  return parse_tokenizer_json(read_text_file(path), path);
}

}  // namespace deepinfer::tokenizer
