// kernels::paged_attention over contexts longer than one key span (attention_span.h): the
// split-K decode and the query-tile prefill against the two-pass reference for f32 / bf16 /
// f16 / int8 caches, head_dim 64 / 128 / 192 and the MLA latent (576, V a 512 prefix), odd
// lengths across span and block boundaries; decode == prefill and thread counts bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "cache/kv_quant.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::first_mismatch;
using testing::random_floats;

struct LongCase {
  int64_t heads, kv_heads, head_dim, v_head_dim, v_row_stride, block_size, len, group;
  bool v_in_k;  // MLA: V is the leading v_head_dim features of each K row
};

const LongCase kLongCases[] = {
    {14, 2, 64, 64, 0, 16, 700, 32, false},     // Qwen2.5-0.5B: 7 query heads per kv head
    {8, 2, 128, 128, 0, 5, 513, 16, false},     // odd block size, one key past two spans
    {4, 1, 192, 128, 0, 8, 300, 64, false},     // head_dim 192, v 128
    {16, 1, 576, 512, 576, 16, 270, 64, true},  // DeepSeek latent: one row for 16 heads
    {40, 1, 80, 64, 80, 16, 290, 16, true},     // two wide tiles of 16 heads and 8 more
    {3, 3, 24, 40, 0, 7, 260, 8, false},        // MHA, scale groups narrower than a vector
    {12, 1, 72, 72, 0, 16, 300, 8, false},      // a group of 12: two tiles of the decode kernel
    {8, 1, 80, 64, 80, 16, 290, 16, true},      // V in the K rows at a GQA-sized group
};

// Stored K/V rows of one layer: every slot of `blocks` blocks filled (unused ones too).
struct Store {
  std::vector<uint8_t> k, v;
  std::vector<float> ks, vs;
};

void fill(const std::vector<float>& rows, int64_t width, DType dtype, int64_t group,
          std::vector<uint8_t>& bytes, std::vector<float>& scales) {
  const auto n = static_cast<int64_t>(rows.size());
  bytes.resize(static_cast<size_t>(n) * dtype_size(dtype));
  scales.resize(dtype == DType::i8 ? static_cast<size_t>(n / group) : 0);
  for (int64_t r = 0; r < n / width; ++r)
    cache::store_kv_row(rows.data() + r * width, width, dtype, group,
                        bytes.data() + static_cast<size_t>(r * width) * dtype_size(dtype),
                        dtype == DType::i8 ? scales.data() + r * (width / group) : nullptr);
}

class KernelsAttentionLong : public testing::PerIsaTest {};

// Every case and cache dtype through `attend`: within 2e-4 of the reference; one token at a
// time (split-K decode) equals the whole batch (query tiles) and any thread count bitwise.
void check_long_contexts(PagedAttentionFn attend) {
  uint32_t seed = 40;
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i8}) {
    for (const LongCase& c : kLongCases) {
      const int64_t blocks = (c.len + c.block_size - 1) / c.block_size;
      std::vector<int32_t> table(static_cast<size_t>(blocks + 3));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(++seed));
      table.resize(static_cast<size_t>(blocks));
      const int64_t slots = (blocks + 3) * c.block_size * c.kv_heads;
      Store st;
      fill(random_floats(static_cast<size_t>(slots * c.head_dim), ++seed, -2.0f, 2.0f), c.head_dim,
           dtype, c.group, st.k, st.ks);
      if (!c.v_in_k)
        fill(random_floats(static_cast<size_t>(slots * c.v_head_dim), ++seed, -2.0f, 2.0f),
             c.v_head_dim, dtype, c.group, st.v, st.vs);
      PagedKv kv{st.k.data(),  c.v_in_k ? st.k.data() : st.v.data(),
                 c.block_size, c.kv_heads,
                 c.head_dim,   c.v_head_dim,
                 table,        c.v_row_stride,
                 dtype};
      if (dtype == DType::i8) {
        kv.k_scale = st.ks.data();
        kv.v_scale = c.v_in_k ? st.ks.data() : st.vs.data();
        kv.quant_group = c.group;
      }
      // A prefill chunk at the end plus queries on both sides of span boundaries.
      std::vector<int32_t> positions;
      for (int64_t p = c.len - 9; p < c.len; ++p) positions.push_back(static_cast<int32_t>(p));
      for (const int32_t p : {255, 256, 0, 17, 511, 512})
        if (p < c.len) positions.push_back(p);
      const auto tokens = static_cast<int64_t>(positions.size());
      const auto q = random_floats(static_cast<size_t>(tokens * c.heads * c.head_dim), ++seed);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      const int64_t out_row = c.heads * c.v_head_dim;
      std::vector<float> ref(static_cast<size_t>(tokens * out_row), NAN);
      reference::paged_attention(q.data(), tokens, positions.data(), c.heads, kv, scale,
                                 ref.data());
      std::vector<float> decode(ref.size(), NAN);
      ThreadPool two(2);
      for (int64_t t = 0; t < tokens; ++t)
        attend(q.data() + t * c.heads * c.head_dim, 1, &positions[static_cast<size_t>(t)], c.heads,
               kv, scale, decode.data() + t * out_row, two);
      // Reference sums run over up to 700 keys in one f32 chain.
      EXPECT_EQ(first_mismatch(decode, ref, 2e-4f, 2e-5f), -1)
          << dtype_name(dtype) << " head_dim=" << c.head_dim << " len=" << c.len;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> batch(ref.size(), NAN);
        attend(q.data(), tokens, positions.data(), c.heads, kv, scale, batch.data(), pool);
        EXPECT_TRUE(bitwise_equal(batch.data(), decode.data(), decode.size()))
            << dtype_name(dtype) << " head_dim=" << c.head_dim << " threads=" << threads;
        std::vector<float> one(static_cast<size_t>(out_row), NAN);
        attend(q.data(), 1, &positions[0], c.heads, kv, scale, one.data(), pool);
        EXPECT_TRUE(bitwise_equal(one.data(), decode.data(), one.size()))
            << dtype_name(dtype) << " head_dim=" << c.head_dim << " decode threads=" << threads;
      }
    }
  }
}

TEST_P(KernelsAttentionLong, SpansMatchReferenceAndDecodeEqualsPrefill) {
  check_long_contexts(&paged_attention);
}

// The query-tile entry (MLA's expanded prefill) runs the span kernel for every group on
// AVX-512, MHA and GQA included.
TEST_P(KernelsAttentionLong, QueryTilesMatchReferenceAndDecodeEqualsPrefill) {
  check_long_contexts(&paged_attention_query_tiles);
}

DI_INSTANTIATE_PER_ISA(KernelsAttentionLong);

}  // namespace
}  // namespace deepinfer::kernels
