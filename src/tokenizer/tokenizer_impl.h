#pragma once
// The parts of a Tokenizer (internal: shared by tokenizer.cpp, tokenizer_load.cpp and
// streaming_detokenizer.cpp).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoders.h"
#include "tokenizer/flat_map.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

struct Tokenizer::Impl {
  std::string source;
  TokenizerConfig config;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  std::unordered_map<int32_t, size_t> added_by_id;  // id -> index in added.tokens()
  // What decoding shows for each added token: its normalized form when it is matched
  // normalized and the normalizer changes it (as tokenizers' normalized_cache), else its
  // content.
  std::vector<std::string> added_decode_content;
  StringIdMap added_by_content;
  std::vector<bool> special_by_id;
  std::unique_ptr<Decoder> decoder;
  bool byte_level_decoder = false;
  bool byte_fallback_decoder = false;  // the chain has ByteFallback
  std::unique_ptr<PostProcessor> post_processor;
  bool raw_bytes = false;  // the final ByteLevel step is folded into the model
  int64_t vocab_size = 0;
  std::optional<int32_t> bos, eos;

  std::optional<std::string_view> token_of(int32_t id) const {
    if (const auto it = added_by_id.find(id); it != added_by_id.end()) {
      return std::string_view(added_decode_content[it->second]);
    }
    return model->id_to_token(id);
  }
  std::optional<int32_t> id_of(std::string_view token) const {
    if (const int32_t id = added_by_content.find(token); id >= 0) return id;
    if (const int32_t id = model->token_to_id(token); id >= 0) return id;
    return std::nullopt;
  }
  // `budget` is what is left of the encode's TextBudget: each segment's final text is taken
  // from it, so the segments of one prompt share it.
  void encode_words(std::string text, bool at_start, TextBudget& budget,
                    std::vector<int32_t>& ids) const;
  void encode_normalized(std::string_view text, bool at_start, TextBudget& budget,
                         std::vector<int32_t>& ids) const;
};

}  // namespace deepinfer::tokenizer
