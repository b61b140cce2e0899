// The int8 attention scores (kernels/attend_i8.h): the AVX-512 chunk scores, with AVX512BW
// products and with vpdpbusd, equal the scalar definition (i8_score) bit for bit on random rows
// and queries, every group size the SIMD path takes, head_dim tails, and the extreme values
// where 16-bit pair sums would saturate.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/attend_i8.h"
#include "kernels/isa.h"

namespace deepinfer::kernels {
namespace {

using detail::I8Query;
using detail::avx512::I8Rows;
using testing::bitwise_equal;
using testing::random_floats;

using ChunkScores = void (*)(const I8Rows&, const int64_t*, const I8Query*, int64_t, float*);

struct Shape {
  int64_t head_dim, group;
};

// Rows of random int8 values (or all `fill` where fill != 0) with random positive scales.
struct Int8Rows {
  std::vector<int8_t> values;
  std::vector<float> scales;
  Int8Rows(int64_t rows, const Shape& s, uint32_t seed, int8_t fill) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(-127, 127);
    values.resize(static_cast<size_t>(rows * s.head_dim));
    for (int8_t& v : values) v = fill != 0 ? fill : static_cast<int8_t>(byte(rng));
    scales =
        random_floats(static_cast<size_t>(rows * s.head_dim / s.group), seed + 1, 0.001f, 0.1f);
  }
};

void expect_chunk_scores_match_definition(ChunkScores scores, const char* name, float q_fill,
                                          int8_t k_fill) {
  const Shape shapes[] = {{64, 32}, {128, 32}, {576, 32}, {64, 64}, {48, 16},
                          {20, 4},  {192, 8},  {36, 4},   {512, 64}};
  uint32_t seed = 90;
  for (const Shape& s : shapes) {
    const int64_t pool_rows = 40;
    const Int8Rows k(pool_rows, s, ++seed, k_fill);
    const I8Rows rows_of_k{k.values.data(),      s.head_dim, k.scales.data(),
                           s.head_dim / s.group, s.head_dim, s.group};
    std::mt19937 rng(++seed);
    std::uniform_int_distribution<int64_t> pick(0, pool_rows - 1);
    int64_t rows[16];
    for (int64_t& r : rows) r = pick(rng);
    const int64_t stored = detail::i8_query_floats(s.head_dim, s.group);
    std::vector<float> queries(static_cast<size_t>(8 * stored));
    I8Query q[8];
    for (int i = 0; i < 8; ++i) {
      auto x = random_floats(static_cast<size_t>(s.head_dim), ++seed, -2.0f, 2.0f);
      if (q_fill != 0.0f)
        for (size_t d = 0; d < x.size(); ++d) x[d] = (d / 2) % 2 ? q_fill : -q_fill;
      q[i] = detail::quantize_query_i8(x.data(), s.head_dim, s.group, queries.data() + i * stored);
    }
    for (int64_t n = 1; n <= 8; ++n) {
      std::vector<float> want(static_cast<size_t>(n * 16)), got(want.size(), -1.0f);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < 16; ++j)
          want[static_cast<size_t>(i * 16 + j)] = detail::i8_score(
              q[i], k.values.data() + rows[j] * s.head_dim,
              k.scales.data() + rows[j] * (s.head_dim / s.group), s.head_dim, s.group);
      scores(rows_of_k, rows, q, n, got.data());
      EXPECT_TRUE(bitwise_equal(got.data(), want.data(), want.size()))
          << name << " head_dim=" << s.head_dim << " group=" << s.group << " queries=" << n;
    }
  }
}

TEST(KernelsAttentionInt8, ChunkScoresEqualTheDefinitionBitwise) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  expect_chunk_scores_match_definition(&detail::avx512::i8_chunk_scores_bw, "avx512bw", 0.0f, 0);
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX512_VNNI on this CPU";
  expect_chunk_scores_match_definition(&detail::avx512::i8_chunk_scores_vnni, "vnni", 0.0f, 0);
}

TEST(KernelsAttentionInt8, ChunkScoresDoNotSaturateAtTheExtremes) {
  // Queries of +-1 (in pairs of one sign) quantize to +-127 and every key byte is -127 (or
  // 127): each product is +-127^2, and a pair's sum, +-32258, is the largest 16-bit partial
  // sum vpmaddubsw can make.
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const int8_t k_fill : {int8_t{-127}, int8_t{127}}) {
    expect_chunk_scores_match_definition(&detail::avx512::i8_chunk_scores_bw, "avx512bw", 1.0f,
                                         k_fill);
    if (cpu_has_avx512_vnni())
      expect_chunk_scores_match_definition(&detail::avx512::i8_chunk_scores_vnni, "vnni", 1.0f,
                                           k_fill);
  }
}

TEST(KernelsAttentionInt8, QueryQuantizesAsTheCacheRows) {
  // q = (1, -0.25, 0.5, 0): scale 1 / 127, values 127, -32 (-31.75), 64 (63.5, ties away from
  // zero), 0.
  const std::vector<float> x = {1.0f, -0.25f, 0.5f, 0.0f};
  std::vector<float> stored(static_cast<size_t>(detail::i8_query_floats(4, 4)));
  const I8Query q = detail::quantize_query_i8(x.data(), 4, 4, stored.data());
  EXPECT_EQ(q.scales[0], 1.0f / 127.0f);
  const int want[] = {127, -32, 64, 0};
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(q.q8[d], want[d]) << d;
    EXPECT_EQ(q.u8[d], want[d] + 128) << d;
    EXPECT_EQ(q.values[d], static_cast<float>(want[d])) << d;
  }
  for (int d = 4; d < 64; ++d) EXPECT_EQ(q.q8[d], 0) << d;  // padded with zeros
}

}  // namespace
}  // namespace deepinfer::kernels
