#include "cache/block_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "core/error.h"

namespace deepinfer::cache {
namespace {

std::vector<int32_t> iota_tokens(int32_t first, int64_t count) {
  std::vector<int32_t> t(static_cast<size_t>(count));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Allocates a table for all of `tokens`, marks them computed and registers the full blocks.
std::vector<int32_t> fill(BlockManager& bm, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> table;
  PrefixChain chain;
  EXPECT_TRUE(bm.allocate(table, std::ssize(tokens)));
  bm.cache_full_blocks(table, tokens, std::ssize(tokens), chain);
  return table;
}

TEST(BlockManager, AllocatesWholeBlocksAndRefusesWithoutSideEffects) {
  BlockManager bm(8, 4, false);
  std::vector<int32_t> a;
  ASSERT_TRUE(bm.allocate(a, 10));  // ceil(10 / 4) = 3 blocks
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(bm.free_blocks(), 5);
  ASSERT_TRUE(bm.allocate(a, 12));  // still 3 blocks
  EXPECT_EQ(a.size(), 3u);
  std::vector<int32_t> b;
  EXPECT_FALSE(bm.allocate(b, 21));  // 6 blocks > 5 free
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.free_blocks(), 5);
  EXPECT_EQ(bm.blocks_needed(a, 13), 1);
  ASSERT_TRUE(bm.allocate(b, 20));
  EXPECT_EQ(bm.free_blocks(), 0);
  EXPECT_EQ(bm.stats().peak_used_blocks, 8);
  EXPECT_DOUBLE_EQ(bm.stats().usage(), 1.0);
  for (int32_t id : a) EXPECT_EQ(bm.ref_count(id), 1);
  bm.release(a);
  bm.release(b);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(bm.free_blocks(), 8);
}

TEST(BlockManager, MemoryBudgetSizesThePool) {
  // 1 GiB / (1 KiB per token * 16 tokens) = 65536 blocks; 0.5 GiB -> 32768.
  EXPECT_EQ(BlockManager::blocks_for_memory(1.0, 1024, 16), 65536);
  EXPECT_EQ(BlockManager::blocks_for_memory(0.5, 1024, 16), 32768);
  EXPECT_EQ(BlockManager::blocks_for_memory(1.0, 3000, 16), 22369);  // floor(2^30 / 48000)
  EXPECT_THROW(BlockManager::blocks_for_memory(1e-9, 1024, 16), Error);
  EXPECT_THROW(BlockManager::blocks_for_memory(-1, 1024, 16), Error);
}

TEST(BlockManager, SharedBlocksAreFreedByTheLastHolder) {
  BlockManager bm(4, 2, false);
  std::vector<int32_t> a;
  ASSERT_TRUE(bm.allocate(a, 4));
  std::vector<int32_t> b(a.begin(), a.begin() + 1);
  bm.share(b);
  EXPECT_EQ(bm.ref_count(a[0]), 2);
  bm.release(a);
  EXPECT_EQ(bm.free_blocks(), 3);
  EXPECT_EQ(bm.ref_count(b[0]), 1);
  bm.release(b);
  EXPECT_EQ(bm.free_blocks(), 4);
}

TEST(BlockManager, PrefixLookupFindsFullBlocksButNeverTheLastToken) {
  BlockManager bm(16, 4, true);
  const auto tokens = iota_tokens(100, 14);  // 3 full blocks + 2 tokens
  auto table = fill(bm, tokens);
  EXPECT_EQ(bm.stats().cached_blocks, 3);

  auto longer = tokens;
  longer.push_back(7);
  auto m = bm.find_prefix(longer);
  EXPECT_EQ(m.tokens, 12);
  EXPECT_EQ(m.blocks, std::vector<int32_t>(table.begin(), table.begin() + 3));

  // Exactly three blocks of prompt: the last block holds the last token, so two match.
  m = bm.find_prefix(std::vector<int32_t>(tokens.begin(), tokens.begin() + 12));
  EXPECT_EQ(m.tokens, 8);
  // A change in the second block stops the match after the first.
  auto changed = tokens;
  changed[5] = 1;
  EXPECT_EQ(bm.find_prefix(changed).tokens, 4);
  // Same second block under a different first block is a different chain.
  auto other_parent = tokens;
  other_parent[0] = 1;
  EXPECT_EQ(bm.find_prefix(other_parent).tokens, 0);
  bm.release(table);
}

TEST(BlockManager, AdoptedPrefixIsCountedAndReferenced) {
  BlockManager bm(8, 4, true);
  const auto tokens = iota_tokens(1, 13);
  auto first = fill(bm, tokens);  // 4 blocks, 3 cached
  bm.release(first);
  EXPECT_EQ(bm.free_blocks(), 8);  // cached blocks with no holder are free (evictable)

  auto query = iota_tokens(1, 14);
  const auto m = bm.find_prefix(query);
  ASSERT_EQ(m.tokens, 12);
  std::vector<int32_t> table;
  ASSERT_TRUE(bm.allocate(table, 14, &m, 14));
  EXPECT_EQ(table.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(table.begin(), table.begin() + 3), m.blocks);
  EXPECT_EQ(bm.free_blocks(), 4);
  const auto s = bm.stats();
  EXPECT_EQ(s.prefix_query_tokens, 14);
  EXPECT_EQ(s.prefix_hit_tokens, 12);
  EXPECT_EQ(s.evictions, 0);
  // Registering the chain recognises the adopted blocks as already cached.
  PrefixChain chain;
  bm.cache_full_blocks(table, query, 14, chain);
  EXPECT_EQ(chain.blocks, 3);
  bm.release(table);
}

TEST(BlockManager, RefusedAllocationCountsAdoptedFreeBlocks) {
  BlockManager bm(4, 2, true);
  auto t = fill(bm, {1, 2, 3, 4, 5, 6});  // 3 cached blocks
  bm.release(t);
  const std::vector<int32_t> query = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 5 blocks > pool
  const auto m = bm.find_prefix(query);
  ASSERT_EQ(m.blocks.size(), 3u);
  std::vector<int32_t> table;
  EXPECT_FALSE(bm.allocate(table, 10, &m, 10));
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(bm.free_blocks(), 4);
  EXPECT_EQ(bm.stats().prefix_query_tokens, 0);
  ASSERT_TRUE(bm.allocate(table, 8, &m, 8));
  EXPECT_EQ(bm.free_blocks(), 0);
  bm.release(table);
}

TEST(BlockManager, EvictsLeastRecentlyReleasedCachedBlocksAfterUncachedOnes) {
  BlockManager bm(6, 2, true);
  auto a = fill(bm, {1, 2, 3, 4, 5});  // 2 cached + 1 partial
  auto b = fill(bm, {6, 7, 8, 9, 10});
  bm.release(a);  // a released before b: a is older
  bm.release(b);
  // Two fresh blocks come from the two unregistered partial blocks: nothing evicted.
  std::vector<int32_t> t;
  ASSERT_TRUE(bm.allocate(t, 4));
  EXPECT_EQ(bm.stats().evictions, 0);
  EXPECT_EQ(bm.find_prefix(std::vector<int32_t>{1, 2, 3, 4, 5}).tokens, 4);
  // Two more evict a's blocks (least recently released), tail first: a's second block goes
  // first, then its first; b's chain survives whole.
  ASSERT_TRUE(bm.allocate(t, 6));
  EXPECT_EQ(bm.stats().evictions, 1);
  EXPECT_EQ(bm.find_prefix(std::vector<int32_t>{1, 2, 3, 4, 5}).tokens, 2);
  ASSERT_TRUE(bm.allocate(t, 8));
  EXPECT_EQ(bm.stats().evictions, 2);
  EXPECT_EQ(bm.find_prefix(std::vector<int32_t>{1, 2, 3, 4, 5}).tokens, 0);
  EXPECT_EQ(bm.find_prefix(std::vector<int32_t>{6, 7, 8, 9, 10}).tokens, 4);
  bm.release(t);
}

TEST(BlockManager, DuplicateContentIsRegisteredOnce) {
  BlockManager bm(8, 2, true);
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9};
  auto a = fill(bm, tokens);
  auto b = fill(bm, tokens);  // computed again without a lookup
  EXPECT_EQ(bm.stats().cached_blocks, 2);
  bm.release(a);
  // b's blocks carry the same chain identity, so b's own later blocks stay reachable.
  auto longer = tokens;
  longer.insert(longer.end(), {10, 11});
  PrefixChain chain;
  ASSERT_TRUE(bm.allocate(b, 7));
  bm.cache_full_blocks(b, longer, 7, chain);
  EXPECT_EQ(bm.find_prefix(std::vector<int32_t>{5, 6, 7, 8, 9, 10, 1}).tokens, 6);
  bm.release(b);
}

TEST(BlockManager, DisabledPrefixCachingNeverMatches) {
  BlockManager bm(8, 2, false);
  auto a = fill(bm, {1, 2, 3, 4, 5});
  EXPECT_EQ(bm.find_prefix(std::vector<int32_t>{1, 2, 3, 4, 5}).tokens, 0);
  EXPECT_EQ(bm.stats().cached_blocks, 0);
  bm.release(a);
}

// Random allocate / share / release / cache traffic against a plain reference count model.
TEST(BlockManager, RandomTrafficKeepsReferenceCountsExact) {
  std::mt19937 rng(7);
  BlockManager bm(24, 3, true);
  std::vector<std::vector<int32_t>> tables;
  for (int iter = 0; iter < 3000; ++iter) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 || tables.empty()) {
      std::vector<int32_t> tokens(1 + rng() % 14);
      for (auto& t : tokens) t = static_cast<int32_t>(rng() % 3);  // many repeats: cache hits
      const auto m = bm.find_prefix(tokens);
      std::vector<int32_t> table;
      if (bm.allocate(table, std::ssize(tokens), &m, std::ssize(tokens))) {
        PrefixChain chain;
        bm.cache_full_blocks(table, tokens, std::ssize(tokens), chain);
        tables.push_back(std::move(table));
      }
    } else if (op == 1) {
      auto& t = tables[rng() % tables.size()];
      if (!t.empty()) {
        std::vector<int32_t> copy(t.begin(), t.begin() + 1 + rng() % t.size());
        bm.share(copy);
        tables.push_back(std::move(copy));
      }
    } else {
      const size_t i = rng() % tables.size();
      bm.release(tables[i]);
      tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::map<int32_t, int32_t> refs;
    for (const auto& t : tables) {
      for (int32_t b : t) ++refs[b];
    }
    int64_t free = 0;
    for (int32_t b = 0; b < 24; ++b) {
      const int32_t expected = refs.count(b) ? refs[b] : 0;
      ASSERT_EQ(bm.ref_count(b), expected) << "block " << b << " at iteration " << iter;
      free += expected == 0;
    }
    ASSERT_EQ(bm.free_blocks(), free);
  }
  for (auto& t : tables) bm.release(t);
  EXPECT_EQ(bm.free_blocks(), 24);
  EXPECT_GT(bm.stats().prefix_hit_tokens, 0);
  EXPECT_GT(bm.stats().evictions, 0);
}

}  // namespace
}  // namespace deepinfer::cache
