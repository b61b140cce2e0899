// kernels::linear under MatmulPrecision::bf16: x rounded to bf16 before multiplying by bf16
// weights. Checked against the scalar reference run on the rounded x, for bitwise batch
// invariance (m, row position, threads), and that f32 / f16 weights are not affected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::random_floats;

// Sets the precision for the lifetime of the guard.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(MatmulPrecision p) { set_matmul_precision(p); }
  ~PrecisionGuard() { set_matmul_precision(MatmulPrecision::f32); }  // the tests' default
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;
};

std::vector<uint16_t> to_bits(const std::vector<float>& f, DType dtype) {
  std::vector<uint16_t> bits(f.size());
  convert_from_f32(f.data(), bits.data(), dtype, f.size());
  return bits;
}

std::vector<float> round_to_bf16(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return out;
}

class KernelsLinearBf16 : public testing::PerIsaTest {};

TEST_P(KernelsLinearBf16, MatchesReferenceOnRoundedActivations) {
  const PrecisionGuard bf16(MatmulPrecision::bf16);
  ThreadPool pool(2);
  uint32_t seed = 100;
  int shapes = 0, shapes_rounded = 0;  // among k >= 31: results beyond the exact tolerance
  for (int64_t k : {1, 3, 31, 32, 33, 67, 130, 896}) {
    for (int64_t n : {1, 5, 33}) {
      for (int64_t m : {1, 2, 5, 17}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " k=" << k << " n=" << n);
        const auto x = random_floats(static_cast<size_t>(m * k), ++seed);
        const auto wf = round_to_bf16(random_floats(static_cast<size_t>(n * k), ++seed));
        const auto w = to_bits(wf, DType::bf16);
        const auto bias = random_floats(static_cast<size_t>(n), ++seed);
        std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size()),
            exact(got.size());
        linear(x.data(), m, k, w.data(), DType::bf16, n, bias.data(), got.data(), pool);
        const auto xr = round_to_bf16(x);
        reference::linear(xr.data(), m, k, w.data(), DType::bf16, n, bias.data(), want.data());
        reference::linear(x.data(), m, k, w.data(), DType::bf16, n, bias.data(), exact.data());
        bool differs_from_exact = false;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const double tol = testing::bf16_dot_tolerance(&xr[i * k], &wf[j * k], k, bias[j]);
            const size_t at = static_cast<size_t>(i * n + j);
            ASSERT_LE(std::fabs(got[at] - want[at]), tol) << "at row " << i << " col " << j;
            differs_from_exact |= std::fabs(got[at] - exact[at]) > tol;
          }
        }
        if (k >= 31) {
          ++shapes;
          shapes_rounded += differs_from_exact;
        }
      }
    }
  }
  // Rounding x to 8 mantissa bits usually moves a result beyond the summation tolerance (a
  // single long dot product may stay inside by chance); unrounded x would move none.
  EXPECT_GE(2 * shapes_rounded, shapes) << "x does not look rounded to bf16";
}

TEST_P(KernelsLinearBf16, IsBatchInvariantAcrossRowsPositionsAndThreads) {
  const PrecisionGuard bf16(MatmulPrecision::bf16);
  // m = 300 crosses the row-block size, so rows are also split between threads.
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{13, 67, 33},
                         {13, 130, 70},
                         {13, 896, 19},
                         {300, 17, 21}}) {
    SCOPED_TRACE(::testing::Message() << "m=" << m << " k=" << k << " n=" << n);
    const auto x = random_floats(static_cast<size_t>(m * k), 21);
    const auto w = to_bits(random_floats(static_cast<size_t>(n * k), 22), DType::bf16);
    const auto bias = random_floats(static_cast<size_t>(n), 23);
    ThreadPool single(1);
    std::vector<float> rows(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      linear(x.data() + i * k, 1, k, w.data(), DType::bf16, n, bias.data(), rows.data() + i * n,
             single);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> batch(rows.size(), NAN);
      linear(x.data(), m, k, w.data(), DType::bf16, n, bias.data(), batch.data(), pool);
      EXPECT_TRUE(bitwise_equal(batch.data(), rows.data(), rows.size())) << "threads=" << threads;
      const int64_t first = 3, count = 5;
      std::vector<float> part(static_cast<size_t>(count * n), NAN);
      linear(x.data() + first * k, count, k, w.data(), DType::bf16, n, bias.data(), part.data(),
             pool);
      EXPECT_TRUE(bitwise_equal(part.data(), rows.data() + first * n, part.size()))
          << "threads=" << threads;
    }
  }
}

TEST_P(KernelsLinearBf16, LeavesF32AndF16WeightsExact) {
  const int64_t m = 3, k = 70, n = 9;
  const auto x = random_floats(static_cast<size_t>(m * k), 31);
  const auto wf = random_floats(static_cast<size_t>(n * k), 32);
  const auto wh = to_bits(wf, DType::f16);
  ThreadPool pool(2);
  for (DType dtype : {DType::f32, DType::f16}) {
    const void* w = dtype == DType::f32 ? static_cast<const void*>(wf.data()) : wh.data();
    std::vector<float> exact(static_cast<size_t>(m * n)), got(exact.size(), NAN);
    linear(x.data(), m, k, w, dtype, n, nullptr, exact.data(), pool);
    {
      const PrecisionGuard bf16(MatmulPrecision::bf16);
      linear(x.data(), m, k, w, dtype, n, nullptr, got.data(), pool);
    }
    EXPECT_TRUE(bitwise_equal(got.data(), exact.data(), got.size())) << dtype_name(dtype);
  }
}

TEST(KernelsMatmulPrecision, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(parse_matmul_precision("f32"), MatmulPrecision::f32);
  EXPECT_EQ(parse_matmul_precision("bf16"), MatmulPrecision::bf16);
  EXPECT_EQ(matmul_precision_name(MatmulPrecision::bf16), "bf16");
  EXPECT_THROW(parse_matmul_precision("fp16"), Error);
  if (std::getenv("DEEPINFER_MATMUL_PRECISION") == nullptr) {
    EXPECT_EQ(matmul_precision(), MatmulPrecision::f32);  // the default
  }
}

DI_INSTANTIATE_PER_ISA(KernelsLinearBf16);

}  // namespace
}  // namespace deepinfer::kernels
