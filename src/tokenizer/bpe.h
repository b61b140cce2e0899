#pragma once
// The BPE model of tokenizer.json: vocabulary, ranked merges, and the merge loop of the Rust
// `tokenizers` crate (lowest rank first, leftmost on ties), with a per-word cache.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/flat_map.h"
#include "tokenizer/word_cache.h"

namespace deepinfer::tokenizer {

// Ids index dense tables; real vocabularies stay far below this.
inline constexpr int64_t kMaxTokenId = int64_t{1} << 24;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // Throws Error naming `source` for merges that reference tokens missing from the vocab.
  BpeModel(std::vector<std::pair<std::string, int64_t>> vocab,
           std::vector<std::pair<std::string, std::string>> merges, BpeOptions options,
           const std::string& source);
  ~BpeModel();

  // Appends the ids of one pre-tokenized word. With `raw_bytes` the word holds the original
  // bytes and each byte stands for its ByteLevel character (the deferred ByteLevel step).
  void tokenize(std::string_view word, bool raw_bytes, std::vector<int32_t>& out) const;

  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  // nullopt when the id is not in the vocabulary.
  std::optional<std::string_view> id_to_token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= token_of_id_.size() ||
        token_of_id_[static_cast<size_t>(id)].data() == nullptr) {
      return std::nullopt;
    }
    return token_of_id_[static_cast<size_t>(id)];
  }
  int32_t max_id() const { return static_cast<int32_t>(token_of_id_.size()) - 1; }
  size_t vocab_entries() const { return vocab_.size(); }
  // Whether raw-byte input is possible: no subword prefix/suffix to attach.
  bool supports_raw_bytes() const {
    return options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty();
  }

 private:
  void initial_symbols(std::string_view word, bool raw_bytes, std::vector<int32_t>& syms) const;
  void merge(std::vector<int32_t>& syms) const;
  void merge_small(std::vector<int32_t>& syms) const;
  void merge_heap(std::vector<int32_t>& syms) const;
  int32_t unk_id(const char* why) const;

  StringIdMap vocab_;
  std::vector<std::string_view> token_of_id_;  // views into vocab_; null data when unused
  PairMap merges_;
  BpeOptions options_;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_{};           // id of each byte's ByteLevel character
  std::array<int32_t, 256> byte_fallback_ids_{};  // id of "<0xXX>" tokens
  std::unique_ptr<WordCache> cache_;
};

}  // namespace deepinfer::tokenizer
