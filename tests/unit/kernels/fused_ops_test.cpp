// The fused residual step (kernels::add_rms_norm) against add() then rms_norm() — bit for
// bit, per ISA, so the fused decoder keeps every golden and batch invariance — and against
// the scalar reference; the unfused attention (enable_atb_attention = false) against the
// fused paged_attention within float reassociation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::first_mismatch;
using testing::random_floats;

class KernelsFusedOps : public testing::PerIsaTest {};

TEST_P(KernelsFusedOps, AddRmsNormIsBitwiseAddThenRmsNorm) {
  uint32_t seed = 700;
  for (int64_t dim : {1, 7, 8, 15, 16, 17, 33, 130, 896, 1000}) {
    for (int64_t rows : {1, 4}) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " dim=" << dim);
      const auto n = static_cast<size_t>(rows * dim);
      const auto residual = random_floats(n, ++seed, -4.0f, 4.0f);
      const auto x = random_floats(n, ++seed, -2.0f, 2.0f);
      const auto w = random_floats(static_cast<size_t>(dim), ++seed, 0.5f, 1.5f);

      std::vector<float> fused_residual = residual, fused_y(n);
      add_rms_norm(fused_residual.data(), x.data(), w.data(), rows, dim, 1e-6f, fused_y.data());

      std::vector<float> two_step = residual, two_step_y(n);
      add(two_step.data(), x.data(), two_step.data(), rows * dim);
      rms_norm(two_step.data(), w.data(), rows, dim, 1e-6f, two_step_y.data());
      EXPECT_TRUE(bitwise_equal(fused_residual.data(), two_step.data(), n));
      EXPECT_TRUE(bitwise_equal(fused_y.data(), two_step_y.data(), n));

      // The sum itself is exact f32 addition; the norm is within rms_norm's tolerance of the
      // scalar reference (its own test's bound).
      std::vector<float> ref_residual = residual, ref_y(n);
      reference::add_rms_norm(ref_residual.data(), x.data(), w.data(), rows, dim, 1e-6f,
                              ref_y.data());
      EXPECT_EQ(fused_residual, ref_residual);
      EXPECT_EQ(first_mismatch(fused_y, ref_y, 2e-6f, 0.0f), -1);
    }
  }
}

// Hand-checked: residual [1, 2] + x [2, 2] = [3, 4]; mean square 12.5, so y = h / sqrt(12.5)
// times the weight.
TEST_P(KernelsFusedOps, AddRmsNormHandChecked) {
  std::vector<float> residual = {1.0f, 2.0f};
  const std::vector<float> x = {2.0f, 2.0f};
  const std::vector<float> w = {1.0f, 0.5f};
  std::vector<float> y(2);
  add_rms_norm(residual.data(), x.data(), w.data(), 1, 2, 0.0f, y.data());
  EXPECT_EQ(residual, (std::vector<float>{3.0f, 4.0f}));
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(y[1], 0.5 * 4.0 / std::sqrt(12.5), 1e-6);
}

// A sequence of `len` tokens in a shuffled paged cache, f32 or bf16.
struct UnfusedCase {
  int64_t heads, kv_heads, head_dim, v_head_dim, block_size, len;
};

TEST_P(KernelsFusedOps, UnfusedAttentionMatchesFusedWithinReassociation) {
  ThreadPool pool(2);
  uint32_t seed = 900;
  for (const UnfusedCase& c : {UnfusedCase{6, 2, 20, 12, 4, 37}, UnfusedCase{4, 1, 64, 64, 16, 100},
                               UnfusedCase{2, 2, 128, 128, 16, 5}}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(::testing::Message()
                   << "heads=" << c.heads << " len=" << c.len << " " << dtype_name(dtype));
      const int64_t blocks = (c.len + c.block_size - 1) / c.block_size;
      std::vector<int32_t> table(static_cast<size_t>(blocks));
      std::iota(table.begin(), table.end(), 0);
      std::reverse(table.begin(), table.end());
      const auto slots = static_cast<size_t>(blocks * c.block_size * c.kv_heads);
      auto k = random_floats(slots * static_cast<size_t>(c.head_dim), ++seed);
      auto v = random_floats(slots * static_cast<size_t>(c.v_head_dim), ++seed);
      std::vector<uint16_t> k16(k.size()), v16(v.size());
      for (size_t i = 0; i < k.size(); ++i) k16[i] = f32_to_bf16(k[i]);
      for (size_t i = 0; i < v.size(); ++i) v16[i] = f32_to_bf16(v[i]);
      PagedKv kv{dtype == DType::f32 ? static_cast<const void*>(k.data()) : k16.data(),
                 dtype == DType::f32 ? static_cast<const void*>(v.data()) : v16.data(),
                 c.block_size,
                 c.kv_heads,
                 c.head_dim,
                 c.v_head_dim,
                 table};
      kv.dtype = dtype;
      // A prefill of the last 3 positions and a decode of the last one.
      for (int64_t tokens : {int64_t{3}, int64_t{1}}) {
        std::vector<int32_t> positions;
        for (int64_t t = 0; t < tokens; ++t)
          positions.push_back(static_cast<int32_t>(c.len - tokens + t));
        const auto q =
            random_floats(static_cast<size_t>(tokens * c.heads * c.head_dim), ++seed, -2.0f, 2.0f);
        const size_t out_n = static_cast<size_t>(tokens * c.heads * c.v_head_dim);
        std::vector<float> fused(out_n), unfused(out_n), want(out_n);
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        paged_attention(q.data(), tokens, positions.data(), c.heads, kv, scale, fused.data(), pool);
        paged_attention_unfused(q.data(), tokens, positions.data(), c.heads, kv, scale,
                                unfused.data(), pool);
        reference::paged_attention(q.data(), tokens, positions.data(), c.heads, kv, scale,
                                   want.data());
        // |V| <= 1: a convex combination of V rows, summed in another order, differs by a few
        // ulps of 1 per term of the sums; 1e-5 absolute bounds it for these lengths.
        EXPECT_EQ(first_mismatch(unfused, fused, 0.0f, 1e-5f), -1);
        EXPECT_EQ(first_mismatch(unfused, want, 0.0f, 1e-5f), -1);
      }
    }
  }
}

DI_INSTANTIATE_PER_ISA(KernelsFusedOps);

}  // namespace
}  // namespace deepinfer::kernels
