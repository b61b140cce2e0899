#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

// Words up to this many symbols merge with a plain scan; longer ones use a heap so that a
// single huge word (100k characters without a split point) stays O(n log n).
constexpr size_t kSmallWord = 64;
// Words longer than this (bytes) are not cached: they are rare and would bloat the cache.
constexpr size_t kMaxCachedWord = 256;

struct HeapEntry {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  int32_t left, right;  // the pair it merges: a changed pair makes the entry stale
  bool operator>(const HeapEntry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

BpeModel::~BpeModel() = default;

BpeModel::BpeModel(std::vector<std::pair<std::string, int64_t>> vocab,
                   std::vector<std::pair<std::string, std::string>> merges, BpeOptions options,
                   const std::string& source)
    : options_(std::move(options)), cache_(std::make_unique<WordCache>()) {
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    DI_CHECK(id >= 0 && id < kMaxTokenId, source, ": model.vocab: token '", token, "' has id ", id,
             " (ids must be below ", kMaxTokenId, ")");
    max_id = std::max(max_id, id);
  }
  vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab) vocab_.insert(token, static_cast<int32_t>(id));
  vocab = {};
  token_of_id_.assign(static_cast<size_t>(max_id + 1), std::string_view());
  vocab_.for_each([&](std::string_view token, int32_t id) {
    token_of_id_[static_cast<size_t>(id)] = token;  // arena views: never a null pointer
  });

  merges_.reserve(merges.size());
  // Resolved in batches: hash and prefetch every key of the batch, then look them up, so
  // the cache misses of a 150k-entry table overlap instead of adding up.
  constexpr size_t kBatch = 16;
  const size_t prefix_len = options_.continuing_subword_prefix.size();
  std::string joined[kBatch];
  uint64_t hashes[kBatch][3];
  for (size_t first = 0; first < merges.size(); first += kBatch) {
    const size_t count = std::min(kBatch, merges.size() - first);
    for (size_t k = 0; k < count; ++k) {
      const auto& [left, right] = merges[first + k];
      joined[k].assign(left);
      if (prefix_len > 0 && right.compare(0, prefix_len, options_.continuing_subword_prefix) == 0) {
        joined[k].append(right, prefix_len, std::string::npos);
      } else {
        joined[k].append(right);
      }
      hashes[k][0] = StringIdMap::hash(left);
      hashes[k][1] = StringIdMap::hash(right);
      hashes[k][2] = StringIdMap::hash(joined[k]);
      for (const uint64_t h : hashes[k]) vocab_.prefetch(h);
    }
    for (size_t k = 0; k < count; ++k) {
      const size_t rank = first + k;
      const auto& [left, right] = merges[rank];
      const int32_t left_id = vocab_.find(left, hashes[k][0]);
      const int32_t right_id = vocab_.find(right, hashes[k][1]);
      const int32_t new_id = vocab_.find(joined[k], hashes[k][2]);
      DI_CHECK(left_id >= 0, source, ": model.merges[", rank, "] uses token '", left,
               "', which is not in model.vocab");
      DI_CHECK(right_id >= 0, source, ": model.merges[", rank, "] uses token '", right,
               "', which is not in model.vocab");
      DI_CHECK(new_id >= 0, source, ": model.merges[", rank, "] produces '", joined[k],
               "', which is not in model.vocab");
      merges_.insert(left_id, right_id, MergeInfo{static_cast<int32_t>(rank), new_id});
    }
  }

  if (options_.unk_token) unk_id_ = vocab_.find(*options_.unk_token);
  const auto& byte_chars = byte_level::byte_to_utf8();
  char name[8];
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = vocab_.find(byte_chars[b]);
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_fallback_ids_[b] = vocab_.find(name);
  }
}

int32_t BpeModel::unk_id(const char* why) const {
  DI_CHECK(unk_id_ >= 0, "BPE model: unk_token '", options_.unk_token.value_or(""),
           "' is not in the vocabulary (needed for ", why, ")");
  return unk_id_;
}

void BpeModel::initial_symbols(std::string_view word, bool raw_bytes,
                               std::vector<int32_t>& syms) const {
  if (raw_bytes) {
    bool complete = true;
    for (const char c : word) {
      const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
      complete &= id >= 0;
      syms.push_back(id);
    }
    if (complete) return;
    // Some byte characters are missing: take the general path on the rendered text.
    syms.clear();
    std::string rendered;
    byte_level::encode(word, rendered);
    initial_symbols(rendered, false, syms);
    return;
  }
  // As tokenizers' merge_word: each character (with the subword prefix unless first and the
  // suffix if last) is a symbol; unknown ones fall back to bytes, then to unk, else vanish.
  std::string piece;
  bool unk_pending = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    pos += unicode::sequence_length(static_cast<unsigned char>(word[pos]));
    piece.clear();
    if (start > 0) piece += options_.continuing_subword_prefix;
    piece.append(word, start, pos - start);
    if (pos >= word.size()) piece += options_.end_of_word_suffix;
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      if (unk_pending) syms.push_back(unk_id("an unknown character"));
      unk_pending = false;
      syms.push_back(id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (const char c : piece) all &= byte_fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (const char c : piece)
          syms.push_back(byte_fallback_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (options_.unk_token) {
      if (unk_pending && !options_.fuse_unk) syms.push_back(unk_id("an unknown character"));
      unk_pending = true;
    }
  }
  if (unk_pending) syms.push_back(unk_id("an unknown character"));
}

void BpeModel::merge_small(std::vector<int32_t>& syms) const {
  // ranks[i]: the merge of (syms[i], syms[i + 1]). The lowest rank merges first, the
  // leftmost one on ties: the same order as the heap loop of the Rust implementation.
  MergeInfo infos[kSmallWord];
  size_t n = syms.size();
  for (size_t i = 0; i + 1 < n; ++i) infos[i] = merges_.find(syms[i], syms[i + 1]);
  while (n > 1) {
    size_t best = n;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (infos[i].rank >= 0 && infos[i].rank < best_rank) {
        best_rank = infos[i].rank;
        best = i;
      }
    }
    if (best == n) break;
    syms[best] = infos[best].new_id;
    for (size_t i = best + 1; i + 1 < n; ++i) {
      syms[i] = syms[i + 1];
      infos[i] = infos[i + 1];
    }
    --n;
    if (best > 0) infos[best - 1] = merges_.find(syms[best - 1], syms[best]);
    if (best + 1 < n) infos[best] = merges_.find(syms[best], syms[best + 1]);
  }
  syms.resize(n);
}

void BpeModel::merge_heap(std::vector<int32_t>& syms) const {
  DI_CHECK(syms.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "a word of ",
           syms.size(), " symbols is past the BPE merger's 32-bit range");
  const auto n = static_cast<int32_t>(syms.size());
  // Per-thread scratch: long words are common in CJK text, allocations would show.
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<char> removed;
  thread_local std::vector<HeapEntry> heap;
  prev.resize(n);
  next.resize(n);
  removed.assign(n, 0);
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
    if (i + 1 < n) {
      const MergeInfo m = merges_.find(syms[i], syms[i + 1]);
      if (m.rank >= 0) heap.push_back({m.rank, i, m.new_id, syms[i], syms[i + 1]});
    }
  }
  const auto cmp = std::greater<HeapEntry>();
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const HeapEntry top = heap.back();
    heap.pop_back();
    const int32_t pos = top.pos;
    if (removed[pos] || next[pos] < 0) continue;
    const int32_t right = next[pos];
    // Skip entries made stale by an earlier merge of either symbol. (tokenizers compares
    // the merge result instead; a pair is only ever replaced by a different pair with a
    // different result, so the two tests agree.)
    if (syms[pos] != top.left || syms[right] != top.right) continue;
    syms[pos] = top.new_id;
    removed[right] = 1;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = pos;
    if (prev[pos] >= 0) {
      const MergeInfo m = merges_.find(syms[prev[pos]], syms[pos]);
      if (m.rank >= 0) {
        heap.push_back({m.rank, prev[pos], m.new_id, syms[prev[pos]], syms[pos]});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
    if (next[pos] >= 0) {
      const MergeInfo m = merges_.find(syms[pos], syms[next[pos]]);
      if (m.rank >= 0) {
        heap.push_back({m.rank, pos, m.new_id, syms[pos], syms[next[pos]]});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
  }
  size_t out = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!removed[i]) syms[out++] = syms[i];
  }
  syms.resize(out);
}

void BpeModel::merge(std::vector<int32_t>& syms) const {
  if (syms.size() < 2) return;
  if (syms.size() <= kSmallWord) {
    merge_small(syms);
  } else {
    merge_heap(syms);
  }
}

void BpeModel::tokenize(std::string_view word, bool raw_bytes, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (raw_bytes && word.size() == 1) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(word[0])];
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (options_.ignore_merges) {
    int32_t id;
    if (raw_bytes) {
      std::string rendered;
      byte_level::encode(word, rendered);
      id = vocab_.find(rendered);
    } else {
      id = vocab_.find(word);
    }
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWord;
  const uint64_t hash = cacheable ? hash_bytes(word) : 0;
  if (cacheable && cache_->get(word, hash, out)) return;
  thread_local std::vector<int32_t> syms;
  syms.clear();
  initial_symbols(word, raw_bytes, syms);
  merge(syms);
  if (cacheable) cache_->put(word, hash, syms);
  out.insert(out.end(), syms.begin(), syms.end());
}

}  // namespace deepinfer::tokenizer
