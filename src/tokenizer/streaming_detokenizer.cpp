// Incremental detokenization with a sliding window (the scheme vLLM and `tokenizers`'
// DecodeStream use): decode the window with and without the new ids and return the
// difference once no multi-byte character is still open. Decoding from the window start
// rather than token by token keeps decoders that look at neighbours (Metaspace's leading
// space, ByteFallback runs) identical to a full decode.
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {

bool Tokenizer::ends_mid_character(std::span<const int32_t> window, std::span<const int32_t> fresh,
                                   bool skip_special_tokens) const {
  const Impl& m = *impl_;
  const auto contributes = [&](int32_t id) {
    return m.token_of(id).has_value() && !(skip_special_tokens && id >= 0 && id < m.vocab_size &&
                                           m.special_by_id[static_cast<size_t>(id)]);
  };
  if (m.byte_level_decoder) {
    // Exact: look at the raw bytes of the last tokens before the lossy repair.
    std::string tail;
    for (size_t i = window.size(); i-- > 0 && tail.size() < 4;) {
      const int32_t id = window[i];
      if (!contributes(id)) continue;
      const std::string_view token = *m.token_of(id);
      std::string bytes;
      if (!byte_level::decode(token, bytes)) bytes = token;
      tail.insert(0, bytes);
    }
    return unicode::ends_with_incomplete_sequence(tail);
  }
  // ByteFallback turns a whole run of <0xXX> tokens into U+FFFDs when any byte of it is
  // invalid, so a run may change until a token that is not a byte closes it.
  if (m.byte_fallback_decoder) {
    for (size_t i = window.size(); i-- > 0;) {
      if (!contributes(window[i])) continue;
      const std::string_view token = *m.token_of(window[i]);
      if (token.size() == 6 && token.starts_with("<0x") && token.ends_with(">")) return true;
      break;
    }
  }
  // Other decoders: a trailing U+FFFD is treated as open while at most 4 contributing ids
  // are pending (a UTF-8 character has at most 4 bytes, each token gives at least one).
  size_t pending = 0;
  for (const int32_t id : fresh) pending += contributes(id) ? 1 : 0;
  return pending <= 4 && decode(window, skip_special_tokens).ends_with("\xEF\xBF\xBD");
}

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(&tok), skip_special_(skip_special_tokens) {}

std::string StreamingDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  const std::span<const int32_t> all(ids_);
  if (tok_->ends_mid_character(all.subspan(prefix_offset_), all.subspan(read_offset_),
                               skip_special_)) {
    return {};
  }
  std::string text = tok_->decode(all.subspan(prefix_offset_), skip_special_);
  if (text.size() <= prefix_text_.size() || !text.starts_with(prefix_text_)) return {};
  std::string delta = text.substr(prefix_text_.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  prefix_text_ = tok_->decode(all.subspan(prefix_offset_), skip_special_);
  // Keep memory bounded on long generations: drop ids before the window.
  if (prefix_offset_ > 1024) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_));
    read_offset_ -= prefix_offset_;
    prefix_offset_ = 0;
  }
  return delta;
}

std::string StreamingDetokenizer::flush() {
  const std::span<const int32_t> all(ids_);
  std::string text = tok_->decode(all.subspan(prefix_offset_), skip_special_);
  std::string delta;
  if (text.size() > prefix_text_.size() && text.starts_with(prefix_text_)) {
    delta = text.substr(prefix_text_.size());
  }
  ids_.clear();
  prefix_offset_ = read_offset_ = 0;
  prefix_text_.clear();
  return delta;
}

}  // namespace deepinfer::tokenizer
