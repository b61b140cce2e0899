#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/normalizers.h"
#include "tokenizer/text_budget.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

// The code point that ends right before byte offset `end` of valid UTF-8 text.
char32_t code_point_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return unicode::next_code_point(text, start);
}

}  // namespace

int32_t TokenTrie::child(int32_t node, unsigned char byte) const {
  const auto& kids = nodes_[static_cast<size_t>(node)].children;
  const auto it = std::lower_bound(kids.begin(), kids.end(), byte,
                                   [](const auto& kid, unsigned char b) { return kid.first < b; });
  return it != kids.end() && it->first == byte ? it->second : -1;
}

void TokenTrie::insert(std::string_view pattern, int32_t token_index) {
  if (pattern.empty()) return;  // empty tokens never match
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  int32_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{});
      auto& kids = nodes_[static_cast<size_t>(node)].children;
      kids.insert(std::lower_bound(kids.begin(), kids.end(), byte,
                                   [](const auto& kid, unsigned char b) { return kid.first < b; }),
                  {byte, next});
    }
    node = next;
  }
  auto& slot = nodes_[static_cast<size_t>(node)].token_index;
  if (slot < 0) slot = token_index;
}

bool TokenTrie::find(std::string_view text, size_t from, size_t& begin, size_t& end,
                     int32_t& token_index) const {
  if (empty()) return false;
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
    int32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const int32_t idx = nodes_[static_cast<size_t>(node)].token_index;
      if (idx >= 0) {
        best = idx;
        best_end = i + 1;
      }
    }
    if (best >= 0) {
      begin = pos;
      end = best_end;
      token_index = best;
      return true;
    }
  }
  return false;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  // tokenizers builds its matchers from the special tokens first, then the others, each in
  // file order; that order only matters when two patterns are equal.
  for (const bool special_pass : {true, false}) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const AddedToken& token = tokens_[i];
      if (token.special != special_pass) continue;
      if (!token.normalized) {
        raw_trie_.insert(token.content, static_cast<int32_t>(i));
      } else {
        std::string pattern = token.content;
        if (normalizer != nullptr) normalizer->normalize(pattern);
        normalized_trie_.insert(pattern, static_cast<int32_t>(i));
      }
    }
  }
}

void AddedVocabulary::split(std::string_view text, bool normalized,
                            std::vector<Segment>& out) const {
  const TokenTrie& trie = normalized ? normalized_trie_ : raw_trie_;
  size_t start_offset = 0;
  size_t search_from = 0;
  size_t begin = 0, end = 0;
  int32_t index = -1;
  while (search_from < text.size() && trie.find(text, search_from, begin, end, index)) {
    // The scan resumes after the raw match, whatever stripping does below (as aho-corasick's
    // iterator in tokenizers).
    search_from = end;
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    size_t start = begin, stop = end;
    if (token.single_word) {
      const bool word_before = start > 0 && unicode::is_word_char(code_point_before(text, start));
      size_t after = stop;
      const bool word_after =
          stop < text.size() && unicode::is_word_char(unicode::next_code_point(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t prev = new_start - 1;
        while (prev > 0 && (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80) --prev;
        size_t p = prev;
        if (!unicode::is_whitespace(unicode::next_code_point(text, p))) break;
        new_start = prev;
      }
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t p = stop;
        if (!unicode::is_whitespace(unicode::next_code_point(text, p))) break;
        stop = p;
      }
    }
    if (start_offset < start) {
      out.push_back({checked_offset(start_offset), checked_offset(start), -1});
    }
    out.push_back({checked_offset(start), checked_offset(stop), token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) {
    out.push_back({checked_offset(start_offset), checked_offset(text.size()), -1});
  }
}

}  // namespace deepinfer::tokenizer
