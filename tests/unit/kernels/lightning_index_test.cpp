// The lightning indexer's kernels (DeepSeek-V3.2 / GLM-5 sparse attention) against a plain
// double-precision evaluation of sum_h w_h relu(scale q_h . k_j), over keys stored in a
// scattered paged KV cache of every dtype, on every ISA this CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cache/kv_cache.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/lightning_index.h"

namespace deepinfer::kernels {
namespace {

using testing::random_floats;

struct IndexCase {
  int64_t heads;
  int64_t dim;
  int64_t count;
  DType dtype;
};

class LightningIndex : public testing::PerIsaTest {};

// The keys as the cache stores them (rounded / quantized), read back as f32.
std::vector<float> stored_keys(const cache::KvCache& cache, std::span<const int32_t> table,
                               int64_t count, int64_t dim) {
  const PagedKv view = cache.index_view(0, table);
  std::vector<float> out(static_cast<size_t>(count * dim));
  for (int64_t p = 0; p < count; ++p) {
    const int64_t slot =
        table[static_cast<size_t>(p / view.block_size)] * view.block_size + p % view.block_size;
    float* dst = &out[static_cast<size_t>(p * dim)];
    if (view.dtype == DType::i8) {
      dequantize_i8(static_cast<const int8_t*>(view.k) + slot * dim,
                    view.k_scale + slot * (dim / view.quant_group), view.quant_group,
                    static_cast<size_t>(dim), dst);
    } else {
      convert_to_f32(static_cast<const char*>(view.k) + slot * dim * dtype_size(view.dtype),
                     view.dtype, dst, static_cast<size_t>(dim));
    }
  }
  return out;
}

TEST_P(LightningIndex, ScoresEqualAPlainEvaluationInEveryCacheDtype) {
  ThreadPool pool(2);
  const IndexCase cases[] = {{8, 16, 37, DType::f32},    {64, 128, 300, DType::f32},
                             {20, 64, 129, DType::bf16}, {32, 128, 200, DType::f16},
                             {64, 128, 150, DType::i8},  {3, 32, 5, DType::f32}};
  uint32_t seed = 1;
  for (const IndexCase& c : cases) {
    cache::KvCacheSpec spec;
    spec.num_layers = 1;
    spec.kv_heads = 1;
    spec.head_dim = 8;
    spec.block_size = 16;
    spec.num_blocks = 64;
    spec.dtype = c.dtype;
    spec.index_dim = c.dim;
    spec.index_layers = {true};
    cache::KvCache cache(spec);
    // A scattered table: blocks taken out of order.
    std::vector<int32_t> table;
    for (int64_t b = 0; b * 16 < c.count; ++b)
      table.push_back(static_cast<int32_t>((b * 7 + 3) % 64));
    std::vector<int32_t> positions(static_cast<size_t>(c.count));
    for (int64_t p = 0; p < c.count; ++p)
      positions[static_cast<size_t>(p)] = static_cast<int32_t>(p);
    const auto keys = random_floats(static_cast<size_t>(c.count * c.dim), seed++);
    cache.write_index(0, table, positions.data(), c.count, keys.data());
    const auto q = random_floats(static_cast<size_t>(c.heads * c.dim), seed++);
    const auto w = random_floats(static_cast<size_t>(c.heads), seed++);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.dim));

    std::vector<float> got(static_cast<size_t>(c.count));
    lightning_index_scores(q.data(), w.data(), c.heads, scale, cache.index_view(0, table), c.count,
                           got.data(), pool);
    const auto stored = stored_keys(cache, table, c.count, c.dim);
    for (int64_t j = 0; j < c.count; ++j) {
      double want = 0.0, magnitude = 0.0;
      for (int64_t h = 0; h < c.heads; ++h) {
        double dot = 0.0, abs_dot = 0.0;
        for (int64_t d = 0; d < c.dim; ++d) {
          const double term = static_cast<double>(q[static_cast<size_t>(h * c.dim + d)]) *
                              stored[static_cast<size_t>(j * c.dim + d)];
          dot += term;
          abs_dot += std::fabs(term);
        }
        want += w[static_cast<size_t>(h)] * std::max(scale * dot, 0.0);
        magnitude += std::fabs(w[static_cast<size_t>(h)]) * scale * abs_dot;
      }
      EXPECT_NEAR(got[static_cast<size_t>(j)], want, 1e-5 * magnitude + 1e-7)
          << "heads " << c.heads << " dim " << c.dim << " " << dtype_name(c.dtype) << " position "
          << j;
    }
  }
}

TEST_P(LightningIndex, ScoresDoNotDependOnTheThreadCount) {
  cache::KvCacheSpec spec{.num_layers = 1,
                          .kv_heads = 1,
                          .head_dim = 8,
                          .block_size = 16,
                          .num_blocks = 32,
                          .dtype = DType::bf16};
  spec.index_dim = 128;
  spec.index_layers = {true};
  cache::KvCache cache(spec);
  std::vector<int32_t> table;
  for (int32_t b = 31; b >= 0; --b) table.push_back(b);
  const int64_t count = 500;
  std::vector<int32_t> positions(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) positions[static_cast<size_t>(p)] = static_cast<int32_t>(p);
  const auto keys = random_floats(static_cast<size_t>(count * 128), 7);
  cache.write_index(0, table, positions.data(), count, keys.data());
  const auto q = random_floats(64 * 128, 8);
  const auto w = random_floats(64, 9);
  std::vector<float> one(static_cast<size_t>(count)), two(static_cast<size_t>(count));
  ThreadPool single(1), pair(2);
  lightning_index_scores(q.data(), w.data(), 64, 0.1f, cache.index_view(0, table), count,
                         one.data(), single);
  lightning_index_scores(q.data(), w.data(), 64, 0.1f, cache.index_view(0, table), count,
                         two.data(), pair);
  EXPECT_TRUE(testing::bitwise_equal(one.data(), two.data(), one.size()));
}

DI_INSTANTIATE_PER_ISA(LightningIndex);

TEST(TopKPositions, ChoosesTheHighestInPositionOrderAndBreaksTiesTowardsLowerPositions) {
  const std::vector<float> scores = {0.5f, 2.0f, 0.0f, 2.0f, -1.0f, 0.0f, 3.0f, 0.0f};
  std::vector<int32_t> got(4);
  top_k_positions(scores.data(), 8, 4, got.data());
  // 3.0 (6), 2.0 (1, 3), then 0.5 (0).
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 3, 6}));
  std::vector<int32_t> five(5);
  top_k_positions(scores.data(), 8, 5, five.data());
  // The fifth is the first of the three zeros.
  EXPECT_EQ(five, (std::vector<int32_t>{0, 1, 2, 3, 6}));
  std::vector<int32_t> all(8);
  top_k_positions(scores.data(), 8, 8, all.data());
  EXPECT_EQ(all, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(KvCacheIndexKeys, CountInTheBytesPerTokenOnlyInIndexerLayers) {
  cache::KvCacheSpec spec{.num_layers = 3,
                          .kv_heads = 1,
                          .head_dim = 576,
                          .block_size = 16,
                          .num_blocks = 4,
                          .dtype = DType::bf16};
  const int64_t dense = spec.bytes_per_token();
  EXPECT_EQ(dense, 3 * 576 * 2);
  spec.index_dim = 128;
  spec.index_layers = {true, false, true};
  EXPECT_EQ(spec.bytes_per_token(), dense + 2 * 128 * 2);
  spec.dtype = DType::i8;
  spec.quant_group = 32;
  // int8: 576 / 32 scales per latent row, 128 / 32 per index row.
  EXPECT_EQ(spec.bytes_per_token(), 3 * (576 + 18 * 4) + 2 * (128 + 4 * 4));
  cache::KvCache cache(spec);
  EXPECT_TRUE(cache.has_index(0));
  EXPECT_FALSE(cache.has_index(1));
  std::vector<int32_t> table = {2};
  EXPECT_THROW(cache.index_view(1, table), deepinfer::Error);
}

}  // namespace
}  // namespace deepinfer::kernels
