// kernels::paged_attention over bf16 / f16 / int8 caches. bf16 / f16: the kernel widens each
// stored row to f32 and then runs the f32 arithmetic, so its result must equal, bit for bit,
// the f32 kernel over a cache holding the widened values (computed here with core's scalar
// conversions), and match the scalar reference reading the typed store directly. int8 with
// separate V rows: the scores are integer dot products with the query quantized as the rows
// (attend_i8.h), so the result matches the reference, stays near the f32 cache of the widened
// values, and gives the hand-computed value of that definition; int8 whose V rows lead its K
// rows (MLA's latent cache) is widened as bf16 / f16 are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cache/kv_quant.h"
#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::first_mismatch;
using testing::random_floats;

// Rows of `width` f32 values stored as `dtype` (i8: one scale per `group`), and the values
// that storage represents, widened back with the scalar conversions of core/.
struct TypedRows {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<float> widened;

  TypedRows(const std::vector<float>& rows, int64_t width, DType dtype, int64_t group) {
    const auto n = static_cast<int64_t>(rows.size());
    bytes.resize(static_cast<size_t>(n) * dtype_size(dtype));
    scales.resize(dtype == DType::i8 ? static_cast<size_t>(n / group) : 0);
    widened.resize(rows.size());
    for (int64_t r = 0; r < n / width; ++r) {
      void* dst = bytes.data() + static_cast<size_t>(r * width) * dtype_size(dtype);
      float* s = dtype == DType::i8 ? scales.data() + r * (width / group) : nullptr;
      cache::store_kv_row(rows.data() + r * width, width, dtype, group, dst, s);
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto at = static_cast<size_t>(i);
      if (dtype == DType::bf16) {
        widened[at] = bf16_to_f32(reinterpret_cast<const uint16_t*>(bytes.data())[at]);
      } else if (dtype == DType::f16) {
        widened[at] = f16_to_f32(reinterpret_cast<const uint16_t*>(bytes.data())[at]);
      } else {
        widened[at] = scales[at / static_cast<size_t>(group)] *
                      static_cast<float>(reinterpret_cast<const int8_t*>(bytes.data())[at]);
      }
    }
  }
};

struct Case {
  int64_t heads, kv_heads, head_dim, v_head_dim, block_size, group;
};

const Case kCases[] = {
    {6, 2, 20, 12, 4, 4},     // GQA, odd sizes, several scales per row
    {4, 1, 64, 64, 16, 64},   // one scale per head row
    {3, 3, 3, 5, 1, 1},       // tiny heads, a scale per element
    {2, 1, 192, 128, 8, 64},  // MLA-like
    {10, 2, 24, 16, 8, 8},    // 5 query heads per kv head
    {4, 2, 48, 24, 4, 12},    // groups of whole vectors plus a tail (AVX2: 8 + 4)
    {2, 1, 48, 48, 16, 24},   // AVX-512: 16 + 8
};

class KernelsAttentionDtypes : public testing::PerIsaTest {};

TEST_P(KernelsAttentionDtypes, TypedCacheEqualsF32CacheOfItsWidenedValues) {
  uint32_t seed = 40;
  for (const DType dtype : {DType::bf16, DType::f16, DType::i8}) {
    for (const Case& c : kCases) {
      const int64_t len = 45, blocks = (len + c.block_size - 1) / c.block_size + 1;
      std::vector<int32_t> table(static_cast<size_t>(blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(++seed));
      const int64_t slots = blocks * c.block_size * c.kv_heads;
      const TypedRows k(random_floats(static_cast<size_t>(slots * c.head_dim), ++seed, -3.0f, 3.0f),
                        c.head_dim, dtype, c.group);
      const TypedRows v(
          random_floats(static_cast<size_t>(slots * c.v_head_dim), ++seed, -3.0f, 3.0f),
          c.v_head_dim, dtype, c.group);
      PagedKv typed{k.bytes.data(), v.bytes.data(), c.block_size, c.kv_heads,
                    c.head_dim,     c.v_head_dim,   table,        0,
                    dtype};
      if (dtype == DType::i8) {
        typed.k_scale = k.scales.data();
        typed.v_scale = v.scales.data();
        typed.quant_group = c.group;
      }
      const PagedKv widened{k.widened.data(), v.widened.data(), c.block_size, c.kv_heads,
                            c.head_dim,       c.v_head_dim,     table};
      const std::vector<int32_t> positions = {44, 43, 42, 0, 17, 30};
      const auto tokens = static_cast<int64_t>(positions.size());
      const auto q = random_floats(static_cast<size_t>(tokens * c.heads * c.head_dim), ++seed);
      std::vector<float> got(static_cast<size_t>(tokens * c.heads * c.v_head_dim), NAN);
      std::vector<float> want(got.size(), NAN), ref(got.size(), NAN);
      ThreadPool pool(2);
      paged_attention(q.data(), tokens, positions.data(), c.heads, typed, 0.2f, got.data(), pool);
      paged_attention(q.data(), tokens, positions.data(), c.heads, widened, 0.2f, want.data(),
                      pool);
      reference::paged_attention(q.data(), tokens, positions.data(), c.heads, typed, 0.2f,
                                 ref.data());
      if (dtype == DType::i8) {  // the query's quantization moves the scores a little
        EXPECT_EQ(first_mismatch(got, want, 0.0f, 0.05f), -1) << "head_dim=" << c.head_dim;
      } else {
        EXPECT_TRUE(bitwise_equal(got.data(), want.data(), got.size()))
            << dtype_name(dtype) << " head_dim=" << c.head_dim;
      }
      // One query per call reads the typed rows chunk by chunk (a multi-token call widens
      // the context first): bitwise the same.
      const int64_t out_row = c.heads * c.v_head_dim;
      std::vector<float> alone(got.size(), NAN);
      for (int64_t t = 0; t < tokens; ++t)
        paged_attention(q.data() + t * c.heads * c.head_dim, 1, &positions[static_cast<size_t>(t)],
                        c.heads, typed, 0.2f, alone.data() + t * out_row, pool);
      EXPECT_TRUE(bitwise_equal(alone.data(), got.data(), got.size()))
          << dtype_name(dtype) << " head_dim=" << c.head_dim << " one query per call";
      EXPECT_EQ(first_mismatch(got, ref, 1e-4f, 1e-5f), -1)
          << dtype_name(dtype) << " head_dim=" << c.head_dim;
    }
  }
}

TEST_P(KernelsAttentionDtypes, Int8ValuesCanBeAPrefixOfKeyRows) {
  // MLA absorbed decode over an int8 latent cache: V = the leading features of each K row,
  // with the K row's scales.
  const int64_t heads = 4, width = 48, v_dim = 32, group = 16, block_size = 4, len = 19;
  std::vector<int32_t> table = {2, 0, 4, 1, 3};
  const int64_t slots = 5 * block_size;
  const TypedRows k(random_floats(static_cast<size_t>(slots * width), 5, -2.0f, 2.0f), width,
                    DType::i8, group);
  PagedKv typed{k.bytes.data(), k.bytes.data(),  block_size,      1,    width, v_dim, table, width,
                DType::i8,      k.scales.data(), k.scales.data(), group};
  const PagedKv widened{
      k.widened.data(), k.widened.data(), block_size, 1, width, v_dim, table, width};
  const std::vector<int32_t> positions = {len - 1, 3};
  const auto q = random_floats(static_cast<size_t>(2 * heads * width), 6);
  std::vector<float> got(static_cast<size_t>(2 * heads * v_dim)), want(got.size());
  ThreadPool pool(2);
  // A latent cache keeps the f32 scores of its widened values (attend_i8.h).
  std::vector<float> ref(got.size());
  paged_attention(q.data(), 2, positions.data(), heads, typed, 0.1f, got.data(), pool);
  paged_attention(q.data(), 2, positions.data(), heads, widened, 0.1f, want.data(), pool);
  reference::paged_attention(q.data(), 2, positions.data(), heads, typed, 0.1f, ref.data());
  EXPECT_TRUE(bitwise_equal(got.data(), want.data(), got.size()));
  EXPECT_EQ(first_mismatch(got, ref, 1e-4f, 1e-5f), -1);
  std::vector<float> alone(got.size());
  for (int64_t t = 0; t < 2; ++t)
    paged_attention(q.data() + t * heads * width, 1, &positions[static_cast<size_t>(t)], heads,
                    typed, 0.1f, alone.data() + t * heads * v_dim, pool);
  EXPECT_TRUE(bitwise_equal(alone.data(), got.data(), got.size()));
}

TEST_P(KernelsAttentionDtypes, Int8ScoresAreIntegerDotsOfTheQuantizedQuery) {
  // Two keys, one group of 8: q = (1, 0.25, 0...) quantizes to (127, 32, 0...) with scale
  // 1 / 127; key 0 = (1, ..., 1) is (127, ...) with scale 1 / 127, key 1 = (-2, 2, 0...) is
  // (-127, 127, 0...) with scale 2 / 127. Integer dots: 127 * 127 + 32 * 127 = 20193 and
  // -127 * 127 + 32 * 127 = -12065, so the scores are 20193 / 127^2 and -12065 * 2 / 127^2
  // (1.2520 and -1.4961 where the f32 dot products are 1.25 and -1.5).
  const int64_t dim = 8;
  const std::vector<float> keys = {1, 1, 1, 1, 1, 1, 1, 1, -2, 2, 0, 0, 0, 0, 0, 0};
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8, -1, 0, 1, 0, -1, 0, 1, 0};
  const TypedRows k(keys, dim, DType::i8, dim), v(values, dim, DType::i8, dim);
  std::vector<int32_t> table = {0};
  PagedKv kv{k.bytes.data(),  v.bytes.data(),  4,  1, dim, dim, table, 0, DType::i8,
             k.scales.data(), v.scales.data(), dim};
  const std::vector<float> q = {1.0f, 0.25f, 0, 0, 0, 0, 0, 0};
  std::vector<float> out(dim);
  ThreadPool pool(1);
  const int32_t pos = 1;
  paged_attention(q.data(), 1, &pos, 1, kv, 0.5f, out.data(), pool);
  const double s0 = 0.5 * 20193.0 / (127.0 * 127.0), s1 = 0.5 * -12065.0 * 2.0 / (127.0 * 127.0);
  const double w0 = 1.0 / (1.0 + std::exp(s1 - s0)), w1 = 1.0 - w0;
  for (int64_t d = 0; d < dim; ++d) {
    const double want =
        w0 * v.widened[static_cast<size_t>(d)] + w1 * v.widened[static_cast<size_t>(dim + d)];
    EXPECT_NEAR(out[static_cast<size_t>(d)], want, 1e-5) << "d=" << d;
  }
}

TEST_P(KernelsAttentionDtypes, RejectsInt8WithoutScalesOrWithAGroupThatDoesNotDivide) {
  const int64_t heads = 2, dim = 8;
  std::vector<int8_t> rows(static_cast<size_t>(4 * dim), 1);
  std::vector<float> scales(8, 0.5f);
  std::vector<int32_t> table = {0};
  PagedKv kv{rows.data(), rows.data(), 4, 1, dim, dim, table, 0, DType::i8};
  const auto q = random_floats(static_cast<size_t>(heads * dim), 7);
  std::vector<float> out(static_cast<size_t>(heads * dim));
  ThreadPool pool(1);
  const int32_t pos = 3;
  EXPECT_THROW(paged_attention(q.data(), 1, &pos, heads, kv, 1.0f, out.data(), pool), Error);
  kv.k_scale = kv.v_scale = scales.data();
  kv.quant_group = 3;
  EXPECT_THROW(paged_attention(q.data(), 1, &pos, heads, kv, 1.0f, out.data(), pool), Error);
  kv.quant_group = 4;
  EXPECT_NO_THROW(paged_attention(q.data(), 1, &pos, heads, kv, 1.0f, out.data(), pool));
  // Every element is 1 * 0.5, so every output value is 0.5.
  for (float x : out) EXPECT_EQ(x, 0.5f);
}

// Slot-major rows (row = slot * kv_heads + kv_head, `row_bytes` each; `per_row` scales each)
// reordered head-major (row = kv_head * slots + slot: PagedKv::head_rows = slots).
template <class T>
std::vector<T> head_major(const std::vector<T>& rows, int64_t slots, int64_t kv_heads,
                          int64_t per_row) {
  std::vector<T> out(rows.size());
  if (rows.empty()) return out;  // no scales (not int8)
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t h = 0; h < kv_heads; ++h)
      std::copy_n(rows.begin() + (s * kv_heads + h) * per_row, per_row,
                  out.begin() + (h * slots + s) * per_row);
  return out;
}

// The cache layout with each kv head's rows contiguous (head_rows > 0, KvCache's) holds the
// same rows at other addresses: every path (prefill, one query per call, query tiles) and the
// scalar reference give bitwise what they give on the slot-major layout.
TEST_P(KernelsAttentionDtypes, HeadMajorRowsGiveTheSlotMajorResultBitwise) {
  uint32_t seed = 90;
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i8}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " heads=" << c.heads
                                        << " kv_heads=" << c.kv_heads << " dim=" << c.head_dim);
      const int64_t len = 40, blocks = (len + c.block_size - 1) / c.block_size + 2;
      std::vector<int32_t> table(static_cast<size_t>(blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(++seed));
      const int64_t slots = blocks * c.block_size;
      const auto k_rows =
          random_floats(static_cast<size_t>(slots * c.kv_heads * c.head_dim), ++seed, -3.0f, 3.0f);
      const auto v_rows = random_floats(static_cast<size_t>(slots * c.kv_heads * c.v_head_dim),
                                        ++seed, -3.0f, 3.0f);
      const bool f32 = dtype == DType::f32;
      const TypedRows k(k_rows, c.head_dim, f32 ? DType::bf16 : dtype, c.group);
      const TypedRows v(v_rows, c.v_head_dim, f32 ? DType::bf16 : dtype, c.group);
      const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
      auto bytes_of = [&](const TypedRows& t, const std::vector<float>& rows) {
        if (!f32) return t.bytes;
        std::vector<uint8_t> b(rows.size() * sizeof(float));
        std::memcpy(b.data(), rows.data(), b.size());
        return b;
      };
      const std::vector<uint8_t> k_slot = bytes_of(k, k_rows), v_slot = bytes_of(v, v_rows);
      const auto k_head = head_major(k_slot, slots, c.kv_heads, c.head_dim * elem);
      const auto v_head = head_major(v_slot, slots, c.kv_heads, c.v_head_dim * elem);
      const int64_t group = dtype == DType::i8 ? c.group : 1;
      const auto ks_head = head_major(k.scales, slots, c.kv_heads, c.head_dim / group);
      const auto vs_head = head_major(v.scales, slots, c.kv_heads, c.v_head_dim / group);
      PagedKv slot_major{k_slot.data(), v_slot.data(), c.block_size, c.kv_heads,
                         c.head_dim,    c.v_head_dim,  table,        0,
                         dtype};
      PagedKv by_head = slot_major;
      by_head.k = k_head.data();
      by_head.v = v_head.data();
      by_head.head_rows = slots;
      if (dtype == DType::i8) {
        slot_major.k_scale = k.scales.data();
        slot_major.v_scale = v.scales.data();
        by_head.k_scale = ks_head.data();
        by_head.v_scale = vs_head.data();
        slot_major.quant_group = by_head.quant_group = c.group;
      }
      const std::vector<int32_t> positions = {39, 38, 0, 17, 25};
      const auto tokens = static_cast<int64_t>(positions.size());
      const auto q = random_floats(static_cast<size_t>(tokens * c.heads * c.head_dim), ++seed);
      const size_t out_size = static_cast<size_t>(tokens * c.heads * c.v_head_dim);
      ThreadPool pool(2);
      auto run = [&](const PagedKv& kv, int mode) {
        std::vector<float> out(out_size, NAN);
        if (mode == 0)
          paged_attention(q.data(), tokens, positions.data(), c.heads, kv, 0.2f, out.data(), pool);
        if (mode == 1)
          paged_attention_query_tiles(q.data(), tokens, positions.data(), c.heads, kv, 0.2f,
                                      out.data(), pool);
        if (mode == 2)
          reference::paged_attention(q.data(), tokens, positions.data(), c.heads, kv, 0.2f,
                                     out.data());
        if (mode == 3)
          for (int64_t t = 0; t < tokens; ++t)
            paged_attention(q.data() + t * c.heads * c.head_dim, 1,
                            &positions[static_cast<size_t>(t)], c.heads, kv, 0.2f,
                            out.data() + t * c.heads * c.v_head_dim, pool);
        return out;
      };
      for (int mode = 0; mode < 4; ++mode) {
        const auto want = run(slot_major, mode), got = run(by_head, mode);
        EXPECT_TRUE(bitwise_equal(got.data(), want.data(), got.size())) << "mode " << mode;
      }
    }
  }
}

DI_INSTANTIATE_PER_ISA(KernelsAttentionDtypes);

}  // namespace
}  // namespace deepinfer::kernels
