// The grouped expert job on packed panels (kernels/packed_experts.h, model/layers/moe/
// packed_experts.h) per ISA: bitwise equal to each expert's SwiGLU MLP through the packed
// Linear kernels (gate, up and down packed apart, silu_mul between), for group sizes across the
// register-tile, k-chunk and row-block paths, both x forms of bf16 weights, gathered rows from
// several sources and any thread count; within f32 rounding of the per-expert path
// (ExpertStack::forward, enable_atb_moe = false); scalar ISA and unpacked dtypes fall back.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "../kernels/kernel_test_util.h"
#include "core/dtype.h"
#include "kernels/kernels.h"
#include "model/layers/moe/expert_slices.h"
#include "model/layers/moe/packed_experts.h"

namespace deepinfer::model {
namespace {

using kernels::Isa;
using kernels::testing::random_floats;

constexpr int64_t kHidden = 40;  // k of gate / up: a tail past 32
constexpr int64_t kInter = 20;   // 16 + 4: the second gate / up panel half empty

class PackingOn {
 public:
  PackingOn() : was_(kernels::weight_packing()) { kernels::set_weight_packing(true); }
  ~PackingOn() { kernels::set_weight_packing(was_); }
  PackingOn(const PackingOn&) = delete;
  PackingOn& operator=(const PackingOn&) = delete;

 private:
  bool was_;
};

class PrecisionGuard {
 public:
  explicit PrecisionGuard(kernels::MatmulPrecision p) { kernels::set_matmul_precision(p); }
  ~PrecisionGuard() { kernels::set_matmul_precision(kernels::MatmulPrecision::f32); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;
};

Tensor random_stack(int64_t count, int64_t rows, int64_t cols, DType dtype, uint32_t seed) {
  const std::vector<float> values =
      random_floats(static_cast<size_t>(count * rows * cols), seed, -0.3f, 0.3f);
  Tensor t = Tensor::zeros({count, rows, cols}, dtype);
  convert_from_f32(values.data(), t.raw(), dtype, values.size());
  return t;
}

ExpertStack random_experts(int64_t count, DType dtype, uint32_t seed) {
  return ExpertStack(random_stack(count, 2 * kInter, kHidden, dtype, seed),
                     random_stack(count, kHidden, kInter, dtype, seed + 1));
}

// y = W x through the packed Linear kernel where it packs, else the stored matrix.
void linear_as_layer(const float* x, int64_t m, const void* w, DType dtype, int64_t n, int64_t k,
                     float* y, ThreadPool& pool) {
  const kernels::PackedWeights packed = kernels::pack_weights(w, dtype, n, k);
  if (packed.defined()) {
    kernels::linear(x, m, packed, nullptr, y, pool);
  } else {
    kernels::linear(x, m, k, w, dtype, n, nullptr, y, pool);
  }
}

// Expert j's SwiGLU MLP as GatedMlp computes it: gate, up, down apart (independent of the job).
std::vector<float> dense_mlp(const ExpertStack& stack, int64_t j, const float* x, int64_t rows) {
  ThreadPool pool(1);
  const DType dtype = stack.dtype();
  const std::byte* gate = stack.expert_bytes(j, 0).data();
  const std::byte* up = gate + static_cast<size_t>(kInter * kHidden) * dtype_size(dtype);
  std::vector<float> g(static_cast<size_t>(rows * kInter)), u(g.size());
  std::vector<float> y(static_cast<size_t>(rows * kHidden));
  linear_as_layer(x, rows, gate, dtype, kInter, kHidden, g.data(), pool);
  linear_as_layer(x, rows, up, dtype, kInter, kHidden, u.data(), pool);
  kernels::silu_mul(g.data(), u.data(), g.data(), rows * kInter);
  linear_as_layer(g.data(), rows, stack.expert_bytes(j, 1).data(), stack.down_dtype(), kHidden,
                  kInter, y.data(), pool);
  return y;
}

// Rows expert-major as run_experts receives them at world size 1: counts[j] rows of expert j.
struct Batch {
  std::vector<int64_t> counts;
  std::vector<float> x;
  int64_t rows() const { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); }
};

Batch make_batch(std::vector<int64_t> counts, uint32_t seed) {
  Batch b{std::move(counts), {}};
  b.x = random_floats(static_cast<size_t>(b.rows() * kHidden), seed);
  return b;
}

std::vector<float> want_of(const ExpertStack& stack, const Batch& b, int64_t sources) {
  std::vector<float> want(b.x.size());
  const int64_t per_rank = stack.count();
  int64_t row = 0;
  for (int64_t s = 0; s < sources; ++s) {
    for (int64_t j = 0; j < per_rank; ++j) {
      const int64_t n = b.counts[static_cast<size_t>(s * per_rank + j)];
      if (n == 0) continue;
      const auto y = dense_mlp(stack, j, b.x.data() + row * kHidden, n);
      std::copy(y.begin(), y.end(), want.begin() + row * kHidden);
      row += n;
    }
  }
  return want;
}

std::vector<float> run_packed(const PackedExperts& packed, const Batch& b, int64_t sources,
                              int threads) {
  ThreadPool pool(threads);
  std::vector<float> out(b.x.size(), -1.0f);
  packed.run(b.x.data(), b.counts, sources, out.data(), pool);
  return out;
}

class PackedExpertsPerIsa : public kernels::testing::PerIsaTest {};

// Groups of 1 and 3 rows (decode tiles), 17 (k-chunked row tiles), 260 (two row blocks), and
// an expert without rows; f32 and bf16 weights.
TEST_P(PackedExpertsPerIsa, EqualsEachExpertsPackedLinearMlpBitwise) {
  PackingOn packing;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const ExpertStack stack = random_experts(5, dtype, 3);
    const PackedExperts packed = PackedExperts::pack(stack);
    ASSERT_EQ(packed.defined(), kernels::packs_weights(dtype)) << dtype_name(dtype);
    if (!packed.defined()) continue;  // the scalar ISA, bf16 under AVX2: ExpertStack::forward
    const Batch b = make_batch({1, 0, 3, 17, 260}, 4);
    const auto want = want_of(stack, b, 1);
    for (int threads : {1, 2}) {
      EXPECT_TRUE(run_packed(packed, b, 1, threads) == want)
          << dtype_name(dtype) << ", " << threads << " threads";
    }
  }
}

// Rows of one expert from two sources are gathered into one group and scattered back.
TEST_P(PackedExpertsPerIsa, RowsFromSeveralSourcesAreGatheredBitwise) {
  PackingOn packing;
  const ExpertStack stack = random_experts(3, DType::f32, 7);
  const PackedExperts packed = PackedExperts::pack(stack);
  if (!packed.defined()) GTEST_SKIP() << "no packed kernel under this ISA";
  const Batch b = make_batch({2, 0, 5, 1, 4, 0}, 8);  // sources 0 and 1, three experts each
  EXPECT_TRUE(run_packed(packed, b, 2, 2) == want_of(stack, b, 2));
}

// The per-expert path (enable_atb_moe = false) runs the stored, unpacked matrices: another
// summation order, so the two agree within f32 rounding (bound: 1e-5 of the row's largest).
TEST_P(PackedExpertsPerIsa, AgreesWithThePerExpertPathWithinRounding) {
  PackingOn packing;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const ExpertStack stack = random_experts(4, dtype, 11);
    const PackedExperts packed = PackedExperts::pack(stack);
    if (!packed.defined()) continue;
    const Batch b = make_batch({2, 9, 1, 33}, 12);
    const auto got = run_packed(packed, b, 1, 2);
    ThreadPool pool(2);
    std::vector<float> want(b.x.size());
    int64_t row = 0;
    for (int64_t j = 0; j < stack.count(); ++j) {
      stack.forward(j, b.x.data() + row * kHidden, b.counts[j], want.data() + row * kHidden, pool);
      row += b.counts[j];
    }
    float largest = 0;
    for (float v : want) largest = std::max(largest, std::fabs(v));
    ASSERT_GT(largest, 0.0f);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5f * largest) << dtype_name(dtype) << " at " << i;
  }
}

DI_INSTANTIATE_PER_ISA(PackedExpertsPerIsa);

// bf16 activations (MatmulPrecision::bf16): the job rounds x and the activations as the packed
// Linear does (vdpbf16ps with AVX512_BF16, rounded f32 otherwise), bit for bit.
TEST(PackedExperts, Bf16ActivationsEqualThePackedLinearMlpBitwise) {
  PackingOn packing;
  PrecisionGuard precision(kernels::MatmulPrecision::bf16);
  const ExpertStack stack = random_experts(3, DType::bf16, 15);
  const PackedExperts packed = PackedExperts::pack(stack);
  if (!packed.defined()) GTEST_SKIP() << "bf16 weights are not packed under this ISA";
  const Batch b = make_batch({1, 6, 20}, 16);
  EXPECT_TRUE(run_packed(packed, b, 1, 2) == want_of(stack, b, 1));
}

// Packed under the CPU's best ISA, then run with the ISA forced to scalar: the stored matrices.
TEST(PackedExperts, ScalarIsaRunsTheStoredMatrices) {
  PackingOn packing;
  if (kernels::best_isa() == Isa::scalar) GTEST_SKIP() << "no SIMD ISA here";
  const ExpertStack stack = random_experts(2, DType::f32, 19);
  const PackedExperts packed = PackedExperts::pack(stack);
  ASSERT_TRUE(packed.defined());
  kernels::testing::IsaGuard scalar(Isa::scalar);
  const Batch b = make_batch({3, 2}, 20);
  const auto got = run_packed(packed, b, 1, 2);
  const auto want = want_of(stack, b, 1);  // scalar: linear() on the stored matrices
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6f) << i;
}

// Weight types without a packed kernel (f16, block types) keep ExpertStack::forward.
TEST(PackedExperts, UnpackedDtypesLeaveTheStackAsIs) {
  PackingOn packing;
  EXPECT_FALSE(PackedExperts::pack(random_experts(2, DType::f16, 23)).defined());
  EXPECT_FALSE(PackedExperts::pack(ExpertStack()).defined());
}

}  // namespace
}  // namespace deepinfer::model
