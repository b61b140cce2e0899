#pragma once
// Reference-counted ownership of the KV cache's blocks, with optional prefix caching.
//
// Every block id handed out indexes the same KvCache storage. A block with reference count 0
// sits in one free queue ordered least recently released first; allocation takes from its
// head. With prefix caching on, a full block whose tokens are known is registered under a
// hash chain (parent hash + the block's token ids) and stays registered after its last
// reference is dropped, so a later request with the same prefix reuses it; it is evicted
// (unregistered) only when allocation pops it from the free queue, which makes eviction LRU.
//
// Hits are exact, not probabilistic: a lookup compares the stored token ids of the candidate
// and its parent's identity (a never-reused serial number), so even a 64-bit hash collision
// cannot return a block holding other tokens.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace deepinfer::cache {

// Where a sequence's registered full blocks end: how many leading blocks of its table are
// part of the chain, and the identity of the last one. Owned by the sequence.
struct PrefixChain {
  int64_t blocks = 0;
  uint64_t hash = 0;    // chain hash of the last chained block (0: root)
  uint64_t serial = 0;  // identity of the last chained block's content chain (0: root)
};

// Result of a prefix lookup: cached blocks covering the first `tokens` tokens.
struct PrefixMatch {
  std::vector<int32_t> blocks;
  int64_t tokens = 0;
  PrefixChain chain;
};

struct BlockManagerStats {
  int64_t num_blocks = 0;
  int64_t free_blocks = 0;    // reference count 0 (includes cached, evictable ones)
  int64_t cached_blocks = 0;  // registered in the prefix cache (referenced or not)
  int64_t peak_used_blocks = 0;
  int64_t prefix_query_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;    // of which were found cached
  int64_t evictions = 0;
  double usage() const {
    return num_blocks ? static_cast<double>(num_blocks - free_blocks) / num_blocks : 0.0;
  }
};

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching);

  // Number of blocks a memory budget (GiB) holds for a cache costing bytes_per_token.
  static int64_t blocks_for_memory(double gib, int64_t bytes_per_token, int64_t block_size);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int64_t free_blocks() const { return free_count_; }
  int64_t blocks_for_tokens(int64_t tokens) const {
    return (tokens + block_size_ - 1) / block_size_;
  }
  int32_t ref_count(int32_t block) const;
  BlockManagerStats stats() const;

  // The longest run of cached full blocks that prefixes `tokens`, never covering the last
  // token (its logits must be computed). Read-only: pass the match to allocate() to use it.
  PrefixMatch find_prefix(std::span<const int32_t> tokens) const;

  // Makes `table` cover `num_tokens` tokens. An empty table may first adopt `prefix` (from
  // find_prefix, taking a reference on each block). Returns false and changes nothing when
  // the free queue cannot supply the new blocks. `count_query` records the lookup of
  // `query_tokens` prompt tokens in the hit/miss counters when the allocation succeeds.
  bool allocate(std::vector<int32_t>& table, int64_t num_tokens,
                const PrefixMatch* prefix = nullptr, int64_t query_tokens = 0);
  // Blocks allocate(table, num_tokens) would take from the free queue.
  int64_t blocks_needed(const std::vector<int32_t>& table, int64_t num_tokens) const;

  // Adds a reference to every block of `shared` (n > 1 siblings sharing a prompt).
  void share(std::span<const int32_t> shared);
  // Drops a reference on every block of `table`, last block first (so a sequence's tail is
  // evicted before its head), and clears it.
  void release(std::vector<int32_t>& table);

  // Registers the full blocks of `table` among the first `num_tokens` tokens (`tokens` holds
  // at least that many) that `chain` does not cover yet. No-op without prefix caching.
  void cache_full_blocks(std::span<const int32_t> table, std::span<const int32_t> tokens,
                         int64_t num_tokens, PrefixChain& chain);

 private:
  struct Block {
    int32_t ref = 0;
    int32_t prev = -1;  // free-queue links (-1: none)
    int32_t next = -1;
    bool in_free_queue = false;
    bool cached = false;
    uint64_t hash = 0;
    uint64_t serial = 0;
    uint64_t parent_serial = 0;
    std::vector<int32_t> tokens;  // the block's token ids while cached
  };

  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);
  // A cached block with this content under this parent, or -1.
  int32_t lookup(uint64_t hash, uint64_t parent_serial, std::span<const int32_t> tokens) const;
  void push_free(int32_t block);
  void unlink_free(int32_t block);
  int32_t pop_free();
  void uncache(int32_t block);
  void note_usage();

  int64_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  int32_t free_head_ = -1;
  int32_t free_tail_ = -1;
  int64_t free_count_ = 0;
  uint64_t next_serial_ = 1;
  std::unordered_multimap<uint64_t, int32_t> cache_;  // chain hash -> block
  BlockManagerStats counters_;
};

}  // namespace deepinfer::cache
