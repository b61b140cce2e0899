// Encode and decode over the loaded parts (see tokenizer.h for the pipeline).
#include "tokenizer/tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {

void Tokenizer::Impl::encode_words(std::string text, bool at_start, TextBudget& budget,
                                   std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  PreTokenized pieces;
  pieces.spans.push_back({0, checked_offset(text.size()), at_start});
  pieces.text = std::move(text);
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces, budget);
  budget.check(pieces.text.size(), "pre-tokenizer");
  budget.max_bytes -= pieces.text.size();
  const std::string_view all = pieces.text;
  for (const Span& span : pieces.spans) {
    model->tokenize(all.substr(span.begin, span.end - span.begin), raw_bytes, ids);
  }
}

void Tokenizer::Impl::encode_normalized(std::string_view text, bool at_start, TextBudget& budget,
                                        std::vector<int32_t>& ids) const {
  std::string normalized(text);
  if (normalizer) {
    bool start_kept = true;
    normalizer->normalize(normalized, start_kept, budget);
    budget.check(normalized.size(), "normalizer");
    at_start = at_start && start_kept;
  }
  if (!added.has_normalized_tokens()) {
    encode_words(std::move(normalized), at_start, budget, ids);
    return;
  }
  std::vector<Segment> segments;
  added.split(normalized, true, segments);
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      encode_words(normalized.substr(seg.begin, seg.end - seg.begin), at_start && seg.begin == 0,
                   budget, ids);
    }
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return encode(text, add_special_tokens, TextBudget::for_input(text.size()));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       TextBudget budget) const {
  const Impl& m = *impl_;
  checked_offset(text.size());
  std::string repaired;
  if (!unicode::is_valid_utf8(text)) {
    repaired = unicode::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segments;
  m.added.split(text, false, segments);
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      m.encode_normalized(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, budget, ids);
    }
  }
  if (add_special_tokens && m.post_processor) m.post_processor->apply(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  const auto skipped = [&](int32_t id) {
    return skip_special_tokens && id >= 0 && id < m.vocab_size &&
           m.special_by_id[static_cast<size_t>(id)];
  };
  if (m.byte_level_decoder) {
    std::string bytes;
    for (const int32_t id : ids) {
      const auto token = m.token_of(id);
      if (!token || skipped(id)) continue;
      if (!byte_level::decode(*token, bytes)) bytes += *token;
    }
    return unicode::is_valid_utf8(bytes) ? bytes : unicode::to_valid_utf8(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const auto token = m.token_of(id);
    if (token && !skipped(id)) tokens.emplace_back(*token);
  }
  std::string out;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const auto& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->id_of(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const auto token = impl_->token_of(id);
  return token ? std::string(*token) : std::string();
}

int64_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

bool Tokenizer::is_special(int32_t id) const {
  const auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added.tokens()[it->second].special;
}

const TokenizerConfig& Tokenizer::config() const {
  return impl_->config;
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos;
}

}  // namespace deepinfer::tokenizer
