// kernels::paged_attention against the two-pass reference for every ISA, and its
// invariances: prefill == token-by-token decode, any block placement, any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::first_mismatch;
using testing::random_floats;

struct Geometry {
  int64_t heads, kv_heads, head_dim, v_head_dim, block_size;
};

// One sequence of `len` tokens whose K/V rows are random; block_table[i] = physical block of
// logical block i. Rows are written at their physical slots, unused blocks hold garbage.
struct Cache {
  Geometry g;
  std::vector<int32_t> table;
  std::vector<float> k, v;

  Cache(const Geometry& geom, int64_t len, std::vector<int32_t> block_table, uint32_t seed)
      : g(geom), table(std::move(block_table)) {
    const int64_t blocks = static_cast<int64_t>(table.size()) + 2;  // spare blocks: garbage
    k = random_floats(static_cast<size_t>(blocks * g.block_size * g.kv_heads * g.head_dim),
                      seed + 1000, -50.0f, 50.0f);
    v = random_floats(static_cast<size_t>(blocks * g.block_size * g.kv_heads * g.v_head_dim),
                      seed + 2000, -50.0f, 50.0f);
    const auto rows_k = random_floats(static_cast<size_t>(len * g.kv_heads * g.head_dim), seed);
    const auto rows_v =
        random_floats(static_cast<size_t>(len * g.kv_heads * g.v_head_dim), seed + 1);
    for (int64_t p = 0; p < len; ++p) {
      const int64_t slot =
          table[static_cast<size_t>(p / g.block_size)] * g.block_size + p % g.block_size;
      std::copy_n(rows_k.begin() + p * g.kv_heads * g.head_dim, g.kv_heads * g.head_dim,
                  k.begin() + slot * g.kv_heads * g.head_dim);
      std::copy_n(rows_v.begin() + p * g.kv_heads * g.v_head_dim, g.kv_heads * g.v_head_dim,
                  v.begin() + slot * g.kv_heads * g.v_head_dim);
    }
  }

  PagedKv view() const {
    return PagedKv{k.data(), v.data(), g.block_size, g.kv_heads, g.head_dim, g.v_head_dim, table};
  }
};

std::vector<int32_t> contiguous_table(int64_t blocks) {
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  return table;
}

std::vector<int32_t> shuffled_table(int64_t blocks, uint32_t seed) {
  auto table = contiguous_table(blocks + 2);  // physical ids 0..blocks+1, two unused
  std::shuffle(table.begin(), table.end(), std::mt19937(seed));
  table.resize(static_cast<size_t>(blocks));
  return table;
}

const Geometry kGeometries[] = {
    {6, 2, 20, 12, 4},    // GQA 3:1, head_dim != v_head_dim, odd-ish sizes
    {4, 1, 64, 64, 16},   // MQA, vector-width head dims
    {3, 3, 3, 5, 1},      // MHA, tiny heads, one token per block
    {2, 1, 192, 128, 8},  // MLA-like shapes
    {10, 2, 24, 16, 8},   // group of 5 query heads per kv head
    {12, 1, 32, 16, 16},  // group of 12: AVX-512 prefill tiles of 10 tokens
};

class KernelsAttention : public testing::PerIsaTest {};

TEST_P(KernelsAttention, MatchesTwoPassReference) {
  uint32_t seed = 1;
  for (const Geometry& g : kGeometries) {
    const int64_t len = 41;
    const int64_t blocks = (len + g.block_size - 1) / g.block_size;
    seed += 2;
    const Cache cache(g, len, shuffled_table(blocks, seed), seed + 1);
    // A prefill of the last 7 tokens plus queries at scattered earlier positions.
    const std::vector<int32_t> positions = {34, 35, 36, 37, 38, 39, 40, 0, 1, 16, 17, 5};
    const int64_t tokens = static_cast<int64_t>(positions.size());
    const auto q = random_floats(static_cast<size_t>(tokens * g.heads * g.head_dim), ++seed);
    const float scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
    std::vector<float> got(static_cast<size_t>(tokens * g.heads * g.v_head_dim), NAN);
    std::vector<float> want(got.size());
    ThreadPool pool(2);
    paged_attention(q.data(), tokens, positions.data(), g.heads, cache.view(), scale, got.data(),
                    pool);
    reference::paged_attention(q.data(), tokens, positions.data(), g.heads, cache.view(), scale,
                               want.data());
    EXPECT_EQ(first_mismatch(got, want, 1e-5f, 1e-6f), -1)
        << "heads=" << g.heads << " head_dim=" << g.head_dim;
  }
}

TEST_P(KernelsAttention, SharpScoresStayAccurate) {
  // Large scores make the running max jump between chunks (rescaling must be exact enough).
  const Geometry g{2, 1, 16, 16, 4};
  const int64_t len = 70;
  const Cache cache(g, len, contiguous_table(18), 77);
  const std::vector<int32_t> positions = {69, 33, 15};
  const auto q = random_floats(static_cast<size_t>(3 * g.heads * g.head_dim), 78, -8.0f, 8.0f);
  std::vector<float> got(static_cast<size_t>(3 * g.heads * g.v_head_dim)), want(got.size());
  ThreadPool pool(1);
  paged_attention(q.data(), 3, positions.data(), g.heads, cache.view(), 1.0f, got.data(), pool);
  reference::paged_attention(q.data(), 3, positions.data(), g.heads, cache.view(), 1.0f,
                             want.data());
  EXPECT_EQ(first_mismatch(got, want, 1e-5f, 1e-6f), -1);
}

TEST_P(KernelsAttention, PrefillEqualsTokenByTokenDecodeBitwise) {
  for (const Geometry& g : kGeometries) {
    // Several AVX-512 prefill tiles (paged_attention_tiles: 16 tokens, or 10 at a group of 12).
    const int64_t context = 30, prefill = 40, len = context + prefill;
    const int64_t blocks = (len + g.block_size - 1) / g.block_size;
    const Cache cache(g, len, shuffled_table(blocks, 5), 6);
    std::vector<int32_t> positions(static_cast<size_t>(prefill));
    std::iota(positions.begin(), positions.end(), static_cast<int32_t>(context));
    const auto q = random_floats(static_cast<size_t>(prefill * g.heads * g.head_dim), 7);
    const int64_t out_row = g.heads * g.v_head_dim;
    std::vector<float> decode(static_cast<size_t>(prefill * out_row), NAN);
    ThreadPool single(1);
    for (int64_t t = 0; t < prefill; ++t)
      paged_attention(q.data() + t * g.heads * g.head_dim, 1, &positions[static_cast<size_t>(t)],
                      g.heads, cache.view(), 0.125f, decode.data() + t * out_row, single);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> batch(decode.size(), NAN);
      paged_attention(q.data(), prefill, positions.data(), g.heads, cache.view(), 0.125f,
                      batch.data(), pool);
      EXPECT_TRUE(bitwise_equal(batch.data(), decode.data(), decode.size()))
          << "threads=" << threads << " head_dim=" << g.head_dim;
    }
  }
}

TEST_P(KernelsAttention, BlockPlacementDoesNotChangeTheResult) {
  for (const Geometry& g : kGeometries) {
    const int64_t len = 37;
    const int64_t blocks = (len + g.block_size - 1) / g.block_size;
    // Same logical K/V (same seed), different physical placement.
    const Cache contiguous(g, len, contiguous_table(blocks), 9);
    const Cache shuffled(g, len, shuffled_table(blocks, 10), 9);
    const std::vector<int32_t> positions = {36, 20, 3, 0};
    const auto q = random_floats(static_cast<size_t>(4 * g.heads * g.head_dim), 11);
    std::vector<float> a(static_cast<size_t>(4 * g.heads * g.v_head_dim)), b(a.size());
    ThreadPool pool(2);
    paged_attention(q.data(), 4, positions.data(), g.heads, contiguous.view(), 0.3f, a.data(),
                    pool);
    paged_attention(q.data(), 4, positions.data(), g.heads, shuffled.view(), 0.3f, b.data(), pool);
    EXPECT_TRUE(bitwise_equal(a.data(), b.data(), a.size())) << "head_dim=" << g.head_dim;
  }
}

TEST_P(KernelsAttention, DecodeIsThreadCountInvariant) {
  // One token: the heads of a kv group are split between threads when there are few items.
  for (const Geometry& g : kGeometries) {
    const int64_t len = 50;
    const Cache cache(g, len, shuffled_table((len + g.block_size - 1) / g.block_size, 3), 4);
    const int32_t position = 49;
    const auto q = random_floats(static_cast<size_t>(g.heads * g.head_dim), 5);
    std::vector<float> want(static_cast<size_t>(g.heads * g.v_head_dim)), got(want.size());
    ThreadPool single(1);
    paged_attention(q.data(), 1, &position, g.heads, cache.view(), 0.2f, want.data(), single);
    std::vector<float> ref(want.size());
    reference::paged_attention(q.data(), 1, &position, g.heads, cache.view(), 0.2f, ref.data());
    EXPECT_EQ(first_mismatch(want, ref, 1e-5f, 1e-6f), -1);
    for (int threads : {2, 3, 4, 7}) {
      ThreadPool pool(threads);
      paged_attention(q.data(), 1, &position, g.heads, cache.view(), 0.2f, got.data(), pool);
      EXPECT_TRUE(bitwise_equal(got.data(), want.data(), want.size()))
          << "threads=" << threads << " heads=" << g.heads;
    }
  }
}

TEST_P(KernelsAttention, ValuesCanBeAPrefixOfKeyRows) {
  // MLA absorbed decode: V = the first v_head_dim features of each K row.
  const Geometry g{8, 1, 40, 40, 4};
  const int64_t len = 23, v_dim = 32;
  const Cache cache(g, len, shuffled_table(6, 8), 9);
  PagedKv strided = cache.view();
  strided.v = strided.k;
  strided.v_head_dim = v_dim;
  strided.v_row_stride = g.head_dim;
  // The same values copied into dense rows.
  const int64_t rows = static_cast<int64_t>(cache.k.size()) / g.head_dim;
  std::vector<float> dense_v(static_cast<size_t>(rows * v_dim));
  for (int64_t row = 0; row < rows; ++row)
    std::copy_n(cache.k.begin() + row * g.head_dim, v_dim, dense_v.begin() + row * v_dim);
  PagedKv dense = cache.view();
  dense.v = dense_v.data();
  dense.v_head_dim = v_dim;
  const std::vector<int32_t> positions = {22, 21, 7};
  const auto q = random_floats(static_cast<size_t>(3 * g.heads * g.head_dim), 10);
  std::vector<float> a(static_cast<size_t>(3 * g.heads * v_dim)), b(a.size()), want(a.size());
  ThreadPool pool(2);
  paged_attention(q.data(), 3, positions.data(), g.heads, strided, 0.15f, a.data(), pool);
  paged_attention(q.data(), 3, positions.data(), g.heads, dense, 0.15f, b.data(), pool);
  reference::paged_attention(q.data(), 3, positions.data(), g.heads, strided, 0.15f, want.data());
  EXPECT_TRUE(bitwise_equal(a.data(), b.data(), a.size()));
  EXPECT_EQ(first_mismatch(a, want, 1e-5f, 1e-6f), -1);
}

TEST_P(KernelsAttention, RejectsBadArguments) {
  const Geometry g{4, 2, 8, 8, 4};
  const Cache cache(g, 8, contiguous_table(2), 1);
  const auto q = random_floats(static_cast<size_t>(g.heads * g.head_dim), 2);
  std::vector<float> out(static_cast<size_t>(g.heads * g.v_head_dim));
  ThreadPool pool(1);
  const int32_t too_far = 8;  // needs a third block
  EXPECT_THROW(
      paged_attention(q.data(), 1, &too_far, g.heads, cache.view(), 1.0f, out.data(), pool), Error);
  const int32_t ok = 7;
  EXPECT_THROW(paged_attention(q.data(), 1, &ok, 3, cache.view(), 1.0f, out.data(), pool), Error);
  EXPECT_NO_THROW(paged_attention(q.data(), 1, &ok, g.heads, cache.view(), 1.0f, out.data(), pool));
}

DI_INSTANTIATE_PER_ISA(KernelsAttention);

}  // namespace
}  // namespace deepinfer::kernels
