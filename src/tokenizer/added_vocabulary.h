#pragma once
// Added tokens (special or not) of tokenizer.json, found in the input before any other step,
// with the rules of tokenizers' AddedVocabulary: leftmost-longest matching, tokens marked
// `normalized` matched in the normalized text, `single_word`, `lstrip` and `rstrip`.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

struct Segment {
  uint32_t begin;
  uint32_t end;
  int32_t id;  // the added token's id, or -1 for plain text
};

// A byte trie answering "longest token starting here" for leftmost-longest scanning.
class TokenTrie {
 public:
  void insert(std::string_view pattern, int32_t token_index);  // the first insert wins
  bool empty() const { return nodes_.size() <= 1; }
  // Finds the leftmost position >= from with a match, and the longest match there.
  // Returns false when there is none.
  bool find(std::string_view text, size_t from, size_t& begin, size_t& end,
            int32_t& token_index) const;

 private:
  struct Node {
    int32_t token_index = -1;
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
  };
  int32_t child(int32_t node, unsigned char byte) const;
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // Tokens in tokenizer.json order; `normalizer` (may be null) prepares the patterns of
  // tokens marked `normalized`.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool has_normalized_tokens() const { return !normalized_trie_.empty(); }
  // Splits `text` into plain and token segments covering it, with the raw (not normalized)
  // tokens or, with `normalized`, the normalized ones.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  TokenTrie raw_trie_;
  TokenTrie normalized_trie_;
};

}  // namespace deepinfer::tokenizer
