#include "cache/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "core/error.h"

namespace deepinfer::cache {
namespace {

KvCacheSpec small_spec() {
  KvCacheSpec spec;
  spec.num_layers = 2;
  spec.kv_heads = 2;
  spec.head_dim = 3;
  spec.v_head_dim = 3;
  spec.block_size = 4;
  spec.num_blocks = 5;
  return spec;
}

TEST(KvCache, BytesPerTokenCountsKAndVOfEveryLayer) {
  EXPECT_EQ(small_spec().bytes_per_token(), 2 * 2 * (3 + 3) * 4);
}

TEST(KvCache, GrowsBlockTablesAndReleasesThem) {
  KvCache cache(small_spec());
  std::vector<int32_t> table;
  cache.ensure_capacity(table, 1);
  EXPECT_EQ(table.size(), 1u);
  cache.ensure_capacity(table, 9);
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(std::set<int32_t>(table.begin(), table.end()).size(), 3u);
  EXPECT_EQ(cache.free_blocks(), 2);
  std::vector<int32_t> other;
  EXPECT_THROW(cache.ensure_capacity(other, 13), Error);  // needs 4, 2 free
  EXPECT_EQ(cache.free_blocks(), 2);                      // nothing taken on failure
  cache.release(table);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(cache.free_blocks(), 5);
}

TEST(KvCache, WritesLandInTheSlotTheBlockTableNames) {
  KvCache cache(small_spec());
  std::vector<int32_t> table = {3, 1};  // positions 0-3 in block 3, 4-7 in block 1
  const int32_t positions[] = {2, 5};
  std::vector<float> k(2 * 6), v(2 * 6);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i + 1);
    v[i] = -static_cast<float>(i + 1);
  }
  cache.write(1, table, positions, 2, k.data(), v.data());
  const auto view = cache.view(1, table);
  const auto* view_k = static_cast<const float*>(view.k);
  const auto* view_v = static_cast<const float*>(view.v);
  // Head-major: kv head h's row of pool slot s at (h * 20 + s) * head_dim (20 = 5 blocks x 4).
  EXPECT_EQ(view.head_rows, 20);
  const int64_t dim = 3;
  EXPECT_EQ(view_k[(0 * 20 + 3 * 4 + 2) * dim + 0], 1.0f);   // position 2: block 3, slot 14
  EXPECT_EQ(view_k[(1 * 20 + 3 * 4 + 2) * dim + 0], 4.0f);   // its kv head 1
  EXPECT_EQ(view_k[(1 * 20 + 1 * 4 + 1) * dim + 2], 12.0f);  // position 5: block 1, slot 5
  EXPECT_EQ(view_v[(0 * 20 + 1 * 4 + 1) * dim + 0], -7.0f);
  // other layer untouched
  EXPECT_EQ(static_cast<const float*>(cache.view(0, table).k)[(3 * 4 + 2) * dim], 0.0f);
  // gather_k gives the positions in order, the kv heads of each side by side.
  std::vector<float> gathered(6 * 6, NAN);
  cache.gather_k(1, table, 6, gathered.data());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(gathered[2 * 6 + i], static_cast<float>(i + 1));
    EXPECT_EQ(gathered[5 * 6 + i], static_cast<float>(i + 7));
    EXPECT_EQ(gathered[0 * 6 + i], 0.0f);
  }
  const int32_t outside[] = {8};
  EXPECT_THROW(cache.write(1, table, outside, 1, k.data(), v.data()), Error);
}

}  // namespace
}  // namespace deepinfer::cache
