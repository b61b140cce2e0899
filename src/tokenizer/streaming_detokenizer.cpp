// Incremental detokenization with a sliding window (the scheme vLLM and `tokenizers`'
// DecodeStream use): decode the window with and without the new ids and return the
// difference once it no longer ends in U+FFFD, i.e. no multi-byte character is still open.
// Decoding from the window start rather than token by token keeps decoders that look at
// neighbours (Metaspace's leading space, ByteFallback runs) identical to a full decode.
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

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
