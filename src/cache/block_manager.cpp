#include "cache/block_manager.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace deepinfer::cache {

namespace {

uint64_t mix64(uint64_t z) {
  // The splitmix64 / Murmur3 finaliser: full avalanche over 64 bits.
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  DI_CHECK(num_blocks > 0 && num_blocks < (int64_t{1} << 31),
           "block manager: the pool needs between 1 and 2^31 - 1 blocks, got ", num_blocks);
  DI_CHECK(block_size > 0, "block manager: block_size must be positive, got ", block_size);
  blocks_.resize(static_cast<size_t>(num_blocks));
  // Low ids first, as the KV cache's own free list does.
  for (int64_t i = 0; i < num_blocks; ++i) push_free(static_cast<int32_t>(i));
  counters_.num_blocks = num_blocks;
}

int64_t BlockManager::blocks_for_memory(double gib, int64_t bytes_per_token, int64_t block_size) {
  DI_CHECK(std::isfinite(gib) && gib > 0,
           "--kv-cache-memory must be a positive number of GiB, got ", gib);
  DI_CHECK(bytes_per_token > 0 && block_size > 0, "block manager: invalid KV geometry");
  const double bytes = gib * 1024.0 * 1024.0 * 1024.0;
  const double per_block = static_cast<double>(bytes_per_token) * static_cast<double>(block_size);
  const auto blocks = static_cast<int64_t>(std::floor(bytes / per_block));
  DI_CHECK(blocks >= 1, "--kv-cache-memory ", gib, " GiB holds no KV block (one block of ",
           block_size, " tokens takes ", per_block / (1024.0 * 1024.0),
           " MiB); raise the budget or lower --block-size");
  return blocks;
}

int32_t BlockManager::ref_count(int32_t block) const {
  DI_CHECK(block >= 0 && block < num_blocks(), "block manager: invalid block id ", block);
  return blocks_[static_cast<size_t>(block)].ref;
}

BlockManagerStats BlockManager::stats() const {
  BlockManagerStats s = counters_;
  s.free_blocks = free_count_;
  s.cached_blocks = static_cast<int64_t>(cache_.size());
  return s;
}

uint64_t BlockManager::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent ^ 0x6a09e667f3bcc909ull) + tokens.size();
  for (int32_t t : tokens) {
    h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) * 0x9e3779b97f4a7c15ull));
  }
  // Never 0, which stands for the root.
  return h == 0 ? 1 : h;
}

int32_t BlockManager::lookup(uint64_t hash, uint64_t parent_serial,
                             std::span<const int32_t> tokens) const {
  const auto [first, last] = cache_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    if (b.parent_serial == parent_serial &&
        std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) {
      return it->second;
    }
  }
  return -1;
}

PrefixMatch BlockManager::find_prefix(std::span<const int32_t> tokens) const {
  PrefixMatch match;
  if (!prefix_caching_ || tokens.empty()) return match;
  const auto usable = static_cast<int64_t>(tokens.size() - 1) / block_size_;
  for (int64_t i = 0; i < usable; ++i) {
    const auto slice =
        tokens.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const uint64_t hash = chain_hash(match.chain.hash, slice);
    const int32_t block = lookup(hash, match.chain.serial, slice);
    if (block < 0) break;
    match.blocks.push_back(block);
    match.chain.hash = hash;
    match.chain.serial = blocks_[static_cast<size_t>(block)].serial;
    ++match.chain.blocks;
  }
  match.tokens = match.chain.blocks * block_size_;
  return match;
}

int64_t BlockManager::blocks_needed(const std::vector<int32_t>& table, int64_t num_tokens) const {
  return std::max<int64_t>(0, blocks_for_tokens(num_tokens) - static_cast<int64_t>(table.size()));
}

bool BlockManager::allocate(std::vector<int32_t>& table, int64_t num_tokens,
                            const PrefixMatch* prefix, int64_t query_tokens) {
  const bool adopt = prefix != nullptr && !prefix->blocks.empty();
  DI_CHECK(!adopt || table.empty(), "block manager: a prefix can only start an empty table");
  int64_t adopted_free = 0;  // prefix blocks that leave the free queue when adopted
  if (adopt) {
    for (int32_t b : prefix->blocks) adopted_free += blocks_[static_cast<size_t>(b)].ref == 0;
  }
  const int64_t have =
      adopt ? static_cast<int64_t>(prefix->blocks.size()) : static_cast<int64_t>(table.size());
  const int64_t fresh = std::max<int64_t>(0, blocks_for_tokens(num_tokens) - have);
  if (fresh > free_count_ - adopted_free) return false;
  if (adopt) {
    for (int32_t b : prefix->blocks) {
      Block& block = blocks_[static_cast<size_t>(b)];
      if (block.ref == 0) unlink_free(b);
      ++block.ref;
      table.push_back(b);
    }
  }
  for (int64_t i = 0; i < fresh; ++i) table.push_back(pop_free());
  if (query_tokens > 0) {
    counters_.prefix_query_tokens += query_tokens;
    counters_.prefix_hit_tokens += adopt ? prefix->tokens : 0;
  }
  note_usage();
  return true;
}

void BlockManager::share(std::span<const int32_t> shared) {
  for (int32_t b : shared) {
    Block& block = blocks_[static_cast<size_t>(b)];
    DI_CHECK(block.ref > 0, "block manager: sharing block ", b, ", which nobody holds");
    ++block.ref;
  }
}

void BlockManager::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    Block& block = blocks_[static_cast<size_t>(*it)];
    DI_CHECK(block.ref > 0, "block manager: releasing block ", *it, " more often than held");
    if (--block.ref == 0) push_free(*it);
  }
  table.clear();
}

void BlockManager::cache_full_blocks(std::span<const int32_t> table,
                                     std::span<const int32_t> tokens, int64_t num_tokens,
                                     PrefixChain& chain) {
  if (!prefix_caching_) return;
  const int64_t full = std::min<int64_t>(num_tokens / block_size_, std::ssize(table));
  for (int64_t i = chain.blocks; i < full; ++i) {
    const auto slice =
        tokens.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const int32_t id = table[static_cast<size_t>(i)];
    Block& block = blocks_[static_cast<size_t>(id)];
    if (block.cached) {  // adopted from the cache or shared by a sibling: already registered
      chain.hash = block.hash;
      chain.serial = block.serial;
      ++chain.blocks;
      continue;
    }
    const uint64_t hash = chain_hash(chain.hash, slice);
    const int32_t twin = lookup(hash, chain.serial, slice);
    if (twin >= 0) {
      // Same content computed twice (e.g. two requests prefilled it in the same step): keep
      // one registered copy; this block stays private and is freed unregistered.
      chain.serial = blocks_[static_cast<size_t>(twin)].serial;
    } else {
      block.cached = true;
      block.hash = hash;
      block.serial = next_serial_++;
      block.parent_serial = chain.serial;
      block.tokens.assign(slice.begin(), slice.end());
      cache_.emplace(hash, id);
      chain.serial = block.serial;
    }
    chain.hash = hash;
    ++chain.blocks;
  }
}

void BlockManager::push_free(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  block.in_free_queue = true;
  if (block.cached || free_head_ < 0) {
    // Cached blocks go to the tail: evicted last, least recently released first.
    block.prev = free_tail_;
    block.next = -1;
    if (free_tail_ >= 0) blocks_[static_cast<size_t>(free_tail_)].next = id;
    free_tail_ = id;
    if (free_head_ < 0) free_head_ = id;
  } else {
    // Unregistered blocks hold nothing reusable: hand them out before any cached one.
    block.prev = -1;
    block.next = free_head_;
    blocks_[static_cast<size_t>(free_head_)].prev = id;
    free_head_ = id;
  }
  ++free_count_;
}

void BlockManager::unlink_free(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  DI_CHECK(block.in_free_queue, "block manager: block ", id, " is not free");
  if (block.prev >= 0) {
    blocks_[static_cast<size_t>(block.prev)].next = block.next;
  } else {
    free_head_ = block.next;
  }
  if (block.next >= 0) {
    blocks_[static_cast<size_t>(block.next)].prev = block.prev;
  } else {
    free_tail_ = block.prev;
  }
  block.prev = block.next = -1;
  block.in_free_queue = false;
  --free_count_;
}

int32_t BlockManager::pop_free() {
  DI_CHECK(free_head_ >= 0, "block manager: the KV block pool is exhausted");
  const int32_t id = free_head_;
  unlink_free(id);
  Block& block = blocks_[static_cast<size_t>(id)];
  if (block.cached) {
    uncache(id);
    ++counters_.evictions;
  }
  block.ref = 1;
  return id;
}

void BlockManager::uncache(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  const auto [first, last] = cache_.equal_range(block.hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == id) {
      cache_.erase(it);
      break;
    }
  }
  block.cached = false;
  block.tokens.clear();
  block.serial = block.parent_serial = block.hash = 0;
}

void BlockManager::note_usage() {
  counters_.peak_used_blocks = std::max(counters_.peak_used_blocks, num_blocks() - free_count_);
}

}  // namespace deepinfer::cache
