// Element-wise kernels (rms_norm, rope, softmax, silu_mul, add) against the scalar
// reference for every ISA, on random inputs of awkward sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::kernels {
namespace {

using testing::first_mismatch;
using testing::random_floats;

const int64_t kSizes[] = {1, 3, 7, 8, 16, 17, 33, 67, 130, 1000};

class KernelsOps : public testing::PerIsaTest {};

TEST_P(KernelsOps, RmsNormMatchesReference) {
  uint32_t seed = 100;
  for (int64_t dim : kSizes) {
    for (int64_t rows : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " dim=" << dim);
      const auto x = random_floats(static_cast<size_t>(rows * dim), ++seed, -3.0f, 3.0f);
      const auto w = random_floats(static_cast<size_t>(dim), ++seed, 0.5f, 1.5f);
      std::vector<float> got(x.size()), want(x.size());
      rms_norm(x.data(), w.data(), rows, dim, 1e-6f, got.data());
      reference::rms_norm(x.data(), w.data(), rows, dim, 1e-6f, want.data());
      EXPECT_EQ(first_mismatch(got, want, 2e-6f, 0.0f), -1);
      // In place (y aliases x).
      std::vector<float> inplace = x;
      rms_norm(inplace.data(), w.data(), rows, dim, 1e-6f, inplace.data());
      EXPECT_EQ(inplace, got);
    }
  }
}

TEST_P(KernelsOps, RmsNormPutsEpsInsideTheSqrt) {
  // mean(x^2) = 0 for a zero row: y = 0; for a tiny row eps dominates.
  const std::vector<float> x = {3e-4f, -4e-4f};
  const std::vector<float> w = {1.0f, 2.0f};
  std::vector<float> y(2);
  rms_norm(x.data(), w.data(), 1, 2, 1e-6f, y.data());
  const float inv = 1.0f / std::sqrt((9e-8f + 16e-8f) / 2.0f + 1e-6f);
  EXPECT_NEAR(y[0], 3e-4f * inv, 1e-6f);
  EXPECT_NEAR(y[1], -4e-4f * inv * 2.0f, 1e-6f);
}

TEST_P(KernelsOps, RopeMatchesReferenceForBothLayoutsAndPartialRotary) {
  uint32_t seed = 200;
  for (RopeLayout layout : {RopeLayout::half_split, RopeLayout::interleaved}) {
    for (auto [head_dim, rotary_dim] : {std::pair<int64_t, int64_t>{64, 64},
                                        {128, 64},
                                        {6, 2},
                                        {40, 34},
                                        {64, 32},
                                        {96, 96},
                                        {10, 0}}) {
      SCOPED_TRACE(::testing::Message() << "layout=" << static_cast<int>(layout)
                                        << " head_dim=" << head_dim << " rotary=" << rotary_dim);
      const int64_t tokens = 3, heads = 5, half = rotary_dim / 2;
      const auto x = random_floats(static_cast<size_t>(tokens * heads * head_dim), ++seed);
      const auto angle = random_floats(static_cast<size_t>(tokens * half), ++seed, -4.0f, 4.0f);
      std::vector<float> cos(angle.size()), sin(angle.size());
      for (size_t i = 0; i < angle.size(); ++i) {
        cos[i] = std::cos(angle[i]);
        sin[i] = std::sin(angle[i]);
      }
      std::vector<float> got = x, want = x;
      rope(got.data(), tokens, heads, head_dim, rotary_dim, cos.data(), sin.data(), layout);
      reference::rope(want.data(), tokens, heads, head_dim, rotary_dim, cos.data(), sin.data(),
                      layout);
      EXPECT_EQ(first_mismatch(got, want, 1e-6f, 1e-7f), -1);
      // Features past rotary_dim pass through untouched.
      for (int64_t r = 0; r < tokens * heads; ++r)
        for (int64_t d = rotary_dim; d < head_dim; ++d)
          ASSERT_EQ(got[r * head_dim + d], x[r * head_dim + d]);
    }
  }
}

TEST_P(KernelsOps, RopeHalfSplitRotatesPairsIAndIPlusHalf) {
  // One head, rotary_dim 4 of head_dim 5, angle pi/2 for pair 0 and 0 for pair 1:
  // (x0, x2) -> (-x2, x0); (x1, x3) unchanged; x4 passes through.
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  const std::vector<float> cos = {0.0f, 1.0f}, sin = {1.0f, 0.0f};
  rope(x.data(), 1, 1, 5, 4, cos.data(), sin.data(), RopeLayout::half_split);
  EXPECT_EQ(x, (std::vector<float>{-3.0f, 2.0f, 1.0f, 4.0f, 5.0f}));
  std::vector<float> y = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  rope(y.data(), 1, 1, 5, 4, cos.data(), sin.data(), RopeLayout::interleaved);
  EXPECT_EQ(y, (std::vector<float>{-2.0f, 1.0f, 3.0f, 4.0f, 5.0f}));
}

TEST_P(KernelsOps, SoftmaxMatchesReference) {
  uint32_t seed = 300;
  for (int64_t cols : kSizes) {
    SCOPED_TRACE(::testing::Message() << "cols=" << cols);
    const int64_t rows = 3;
    auto x = random_floats(static_cast<size_t>(rows * cols), ++seed, -20.0f, 20.0f);
    x[0] = 80.0f;  // large logits must not overflow
    std::vector<float> got = x, want = x;
    softmax(got.data(), rows, cols);
    reference::softmax(want.data(), rows, cols);
    EXPECT_EQ(first_mismatch(got, want, 1e-5f, 1e-30f), -1);
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int64_t c = 0; c < cols; ++c) sum += got[r * cols + c];
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST_P(KernelsOps, SiluMulMatchesReference) {
  uint32_t seed = 400;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    auto gate = random_floats(static_cast<size_t>(n), ++seed, -12.0f, 12.0f);
    const auto up = random_floats(static_cast<size_t>(n), ++seed, -2.0f, 2.0f);
    if (n >= 3) {  // saturated ends and zero
      gate[0] = -100.0f;
      gate[1] = 100.0f;
      gate[2] = 0.0f;
    }
    std::vector<float> got(gate.size()), want(gate.size());
    silu_mul(gate.data(), up.data(), got.data(), n);
    reference::silu_mul(gate.data(), up.data(), want.data(), n);
    EXPECT_EQ(first_mismatch(got, want, 2e-6f, 1e-30f), -1);
    std::vector<float> inplace = gate;
    silu_mul(inplace.data(), up.data(), inplace.data(), n);
    EXPECT_EQ(inplace, got);
  }
}

TEST_P(KernelsOps, AddIsExact) {
  for (int64_t n : kSizes) {
    const auto a = random_floats(static_cast<size_t>(n), 500);
    const auto b = random_floats(static_cast<size_t>(n), 501);
    std::vector<float> got(a.size()), want(a.size());
    add(a.data(), b.data(), got.data(), n);
    reference::add(a.data(), b.data(), want.data(), n);
    EXPECT_EQ(got, want);
    std::vector<float> inplace = a;
    add(inplace.data(), b.data(), inplace.data(), n);
    EXPECT_EQ(inplace, want);
  }
}

DI_INSTANTIATE_PER_ISA(KernelsOps);

}  // namespace
}  // namespace deepinfer::kernels
