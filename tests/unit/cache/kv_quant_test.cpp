#include "cache/kv_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "cache/kv_cache.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::cache {
namespace {

TEST(KvQuant, Int8UsesOneSymmetricScalePerGroup) {
  // Group 0: max |x| = 7.9375 = 127 / 16, so the scale is exactly 1/16. Group 1: all zero.
  const float x[8] = {7.9375f, -1.0f, 0.1f, 3.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int8_t q[8];
  float scales[2];
  store_kv_row(x, 8, DType::i8, 4, q, scales);
  EXPECT_EQ(scales[0], 0.0625f);
  EXPECT_EQ(scales[1], 0.0f);
  const int8_t want[8] = {127, -16, 2, 48, 0, 0, 0, 0};  // 0.1 * 16 = 1.6 rounds to 2
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q[i], want[i]) << i;
  float back[8];
  load_kv_row(q, 8, DType::i8, 4, scales, back);
  const float expected[8] = {7.9375f, -1.0f, 0.125f, 3.0f, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], expected[i]) << i;
}

TEST(KvQuant, Int8GroupWithNanOrInfReadsBackAsNan) {
  const float x[8] = {1.0f, NAN, 2.0f, 3.0f, -INFINITY, 1.0f, 0.5f, 0.25f};
  int8_t q[8];
  float scales[2];
  store_kv_row(x, 8, DType::i8, 4, q, scales);
  float back[8];
  load_kv_row(q, 8, DType::i8, 4, scales, back);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
}

TEST(KvQuant, Int8ErrorIsAtMostHalfAScale) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> x(256), back(256), scales(256 / 32);
  for (float& v : x) v = dist(rng);
  std::vector<int8_t> q(256);
  store_kv_row(x.data(), 256, DType::i8, 32, q.data(), scales.data());
  load_kv_row(q.data(), 256, DType::i8, 32, scales.data(), back.data());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_LE(std::fabs(back[i] - x[i]), scales[i / 32] * 0.5f * 1.0001f) << i;
}

TEST(KvQuant, Int8RoundsHalvesAwayFromZeroAsStdRound) {
  // Scale 1 (max 127): the values are their own quotients, halves included.
  std::vector<float> x = {127.0f, 63.5f,       -63.5f,       0.5f,   -0.5f,   1.5f,
                          -2.5f,  0.49999997f, -0.49999997f, 126.5f, -126.5f, 2.0f};
  x.resize(32, 0.0f);
  std::vector<int8_t> q(32);
  float scale = 0.0f;
  store_kv_row(x.data(), 32, DType::i8, 32, q.data(), &scale);
  ASSERT_EQ(scale, 1.0f);
  const int want[] = {127, 64, -64, 1, -1, 2, -3, 0, 0, 127, -127, 2};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(q[static_cast<size_t>(i)], want[i]) << i;
  // Random groups: each value is std::round(x / scale), the documented definition.
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> y(4096), scales(4096 / 16);
  for (float& v : y) v = dist(rng);
  std::vector<int8_t> r(y.size());
  store_kv_row(y.data(), 4096, DType::i8, 16, r.data(), scales.data());
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_EQ(r[i], static_cast<int8_t>(std::round(y[i] / scales[i / 16]))) << i;
}

TEST(KvQuant, HalfTypesRoundTripThroughCoreConversions) {
  const float x[3] = {1.0f / 3.0f, -2.5f, 65504.0f};
  uint16_t h[3];
  float back[3];
  for (DType dtype : {DType::bf16, DType::f16}) {
    store_kv_row(x, 3, dtype, 0, h, nullptr);
    load_kv_row(h, 3, dtype, 0, nullptr, back);
    for (int i = 0; i < 3; ++i) {
      const float want =
          dtype == DType::bf16 ? bf16_to_f32(f32_to_bf16(x[i])) : f16_to_f32(f32_to_f16(x[i]));
      EXPECT_EQ(back[i], want);
    }
  }
}

KvCacheSpec spec_of(DType dtype) {
  KvCacheSpec spec;
  spec.num_layers = 2;
  spec.kv_heads = 2;
  spec.head_dim = 4;
  spec.v_head_dim = 4;
  spec.block_size = 4;
  spec.num_blocks = 3;
  spec.dtype = dtype;
  return spec;
}

TEST(KvCacheDtypes, BytesPerTokenCountsElementsAndScales) {
  // 2 layers x 2 heads x (4 + 4) elements = 32 per token.
  EXPECT_EQ(spec_of(DType::f32).bytes_per_token(), 32 * 4);
  EXPECT_EQ(spec_of(DType::bf16).bytes_per_token(), 32 * 2);
  EXPECT_EQ(spec_of(DType::f16).bytes_per_token(), 32 * 2);
  EXPECT_EQ(spec_of(DType::i8).bytes_per_token(), 32 + 8 * 4);  // a scale per head row
  KvCacheSpec grouped = spec_of(DType::i8);
  grouped.quant_group = 2;
  EXPECT_EQ(grouped.bytes_per_token(), 32 + 16 * 4);
}

TEST(KvCacheDtypes, GatherReturnsTheStoredValues) {
  for (DType dtype : {DType::bf16, DType::f16, DType::i8}) {
    KvCache cache(spec_of(dtype));
    std::vector<int32_t> table = {2, 0};
    const int32_t positions[] = {0, 1, 2, 3, 4, 5};
    std::vector<float> k(6 * 8), v(6 * 8);
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = std::sin(static_cast<float>(i)) * 3.0f;
      v[i] = -k[i];
    }
    cache.write(1, table, positions, 6, k.data(), v.data());
    std::vector<float> got(6 * 8);
    cache.gather_k(1, table, 6, got.data());
    std::vector<float> want(8);
    std::vector<int8_t> q(8);
    float scales[2];
    for (int t = 0; t < 6; ++t) {
      for (int h = 0; h < 2; ++h) {  // head rows are quantized separately
        const float* row = k.data() + t * 8 + h * 4;
        if (dtype == DType::i8) {
          store_kv_row(row, 4, dtype, 4, q.data(), scales);
          load_kv_row(q.data(), 4, dtype, 4, scales, want.data());
        } else {
          uint16_t half[4];
          store_kv_row(row, 4, dtype, 0, half, nullptr);
          load_kv_row(half, 4, dtype, 0, nullptr, want.data());
        }
        for (int d = 0; d < 4; ++d) EXPECT_EQ(got[t * 8 + h * 4 + d], want[d]) << dtype_name(dtype);
      }
    }
  }
}

TEST(KvCacheDtypes, Int8AttentionThroughTheCacheMatchesTheReferenceAndTheF32Cache) {
  // Several heads with several scales per head row: the per-head scale offsets of write,
  // view and gather all matter here.
  KvCacheSpec spec;
  spec.num_layers = 1;
  spec.kv_heads = 3;
  spec.head_dim = 12;
  spec.v_head_dim = 8;
  spec.block_size = 4;
  spec.num_blocks = 6;
  spec.quant_group = 4;
  KvCacheSpec f32_spec = spec;
  f32_spec.dtype = DType::f32;
  spec.dtype = DType::i8;
  KvCache int8_cache(spec), f32_cache(f32_spec);
  std::vector<int32_t> table = {4, 1, 5, 0, 2};
  const int64_t len = 18;
  std::vector<int32_t> positions(len);
  std::iota(positions.begin(), positions.end(), 0);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> k(len * 3 * 12), v(len * 3 * 8);
  for (float& x : k) x = dist(rng);
  for (float& x : v) x = dist(rng) * 10.0f;
  int8_cache.write(0, table, positions.data(), len, k.data(), v.data());
  f32_cache.write(0, table, positions.data(), len, k.data(), v.data());

  std::vector<float> gathered(len * 3 * 12), want(12);
  int8_cache.gather_k(0, table, len, gathered.data());
  for (int64_t row = 0; row < len * 3; ++row) {
    int8_t q[12];
    float scales[3];
    store_kv_row(k.data() + row * 12, 12, DType::i8, 4, q, scales);
    load_kv_row(q, 12, DType::i8, 4, scales, want.data());
    for (int d = 0; d < 12; ++d) ASSERT_EQ(gathered[row * 12 + d], want[d]) << row;
  }

  const int64_t heads = 6;
  std::vector<float> q(2 * heads * 12);
  for (float& x : q) x = dist(rng);
  const int32_t query_positions[] = {17, 9};
  std::vector<float> got(2 * heads * 8), ref(got.size()), exact(got.size());
  ThreadPool pool(2);
  kernels::paged_attention(q.data(), 2, query_positions, heads, int8_cache.view(0, table), 0.3f,
                           got.data(), pool);
  kernels::reference::paged_attention(q.data(), 2, query_positions, heads,
                                      int8_cache.view(0, table), 0.3f, ref.data());
  kernels::paged_attention(q.data(), 2, query_positions, heads, f32_cache.view(0, table), 0.3f,
                           exact.data(), pool);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], ref[i], 1e-4f * (1.0f + std::fabs(ref[i]))) << i;
    // int8 steps are 1/254 of a group's range (v spans +-20): well within 0.3 of f32.
    EXPECT_NEAR(got[i], exact[i], 0.3f) << i;
  }
  EXPECT_NE(got, exact);
}

TEST(KvCacheDtypes, ParsesTheUsualSpellingsAndRejectsOthers) {
  EXPECT_EQ(parse_kv_cache_dtype("auto"), DType::f32);
  EXPECT_EQ(parse_kv_cache_dtype("fp32"), DType::f32);
  EXPECT_EQ(parse_kv_cache_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_kv_cache_dtype("fp16"), DType::f16);
  EXPECT_EQ(parse_kv_cache_dtype("int8"), DType::i8);
  EXPECT_THROW(parse_kv_cache_dtype("fp8"), Error);
  EXPECT_THROW(parse_kv_cache_dtype("int4"), Error);
  KvCacheSpec bad = spec_of(DType::i8);
  bad.quant_group = 3;
  EXPECT_THROW(KvCache{bad}, Error);
}

}  // namespace
}  // namespace deepinfer::cache
