// kernels::linear against the scalar reference, for every ISA and weight dtype, plus the
// batch-invariance contract (bitwise equal results whatever m, row position or threads).
#include <gtest/gtest.h>

#include <cmath>
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

// Weights of one dtype with their exact f32 values (what the reference multiplies by).
struct Weights {
  DType dtype;
  std::vector<float> f32;      // used when dtype == f32
  std::vector<uint16_t> bits;  // bf16 / f16 storage
  const void* data() const {
    return dtype == DType::f32 ? static_cast<const void*>(f32.data()) : bits.data();
  }
};

Weights make_weights(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  Weights w{dtype, random_floats(static_cast<size_t>(n * k), seed), {}};
  if (dtype != DType::f32) {
    w.bits.resize(w.f32.size());
    convert_from_f32(w.f32.data(), w.bits.data(), dtype, w.f32.size());
    w.f32.clear();
  }
  return w;
}

class KernelsLinear : public testing::PerIsaTest {};

TEST_P(KernelsLinear, MatchesReferenceForAllShapesAndDtypes) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t k : {1, 3, 16, 17, 32, 67, 130}) {
      for (int64_t n : {1, 5, 33}) {
        for (int64_t m : {1, 2, 5, 17}) {
          for (bool with_bias : {false, true}) {
            SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " m=" << m << " k=" << k
                                              << " n=" << n << " bias=" << with_bias);
            const auto x = random_floats(static_cast<size_t>(m * k), ++seed);
            const Weights w = make_weights(dtype, n, k, ++seed);
            const auto bias = random_floats(static_cast<size_t>(n), ++seed);
            const float* b = with_bias ? bias.data() : nullptr;
            std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size());
            linear(x.data(), m, k, w.data(), dtype, n, b, got.data(), pool);
            reference::linear(x.data(), m, k, w.data(), dtype, n, b, want.data());
            // Any summation order is within (k + 1) * 2^-24 * sum|terms| of the exact value;
            // two orders differ by at most twice that.
            std::vector<float> wf(static_cast<size_t>(n * k));
            convert_to_f32(w.data(), dtype, wf.data(), wf.size());
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double magnitude = b ? std::fabs(b[j]) : 0.0;
                for (int64_t p = 0; p < k; ++p)
                  magnitude += std::fabs(x[i * k + p] * wf[j * k + p]);
                const double tol = 2.0 * (k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30;
                const size_t at = static_cast<size_t>(i * n + j);
                ASSERT_LE(std::fabs(got[at] - want[at]), tol) << "at row " << i << " col " << j;
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(KernelsLinear, IsBatchInvariantAcrossRowsPositionsAndThreads) {
  // m = 300 crosses the row-block size, so rows are also split between threads.
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{13, 67, 33},
                           {13, 130, 70},
                           {13, 896, 19},
                           {300, 17, 21}}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dtype) << " m=" << m << " k=" << k << " n=" << n);
      const auto x = random_floats(static_cast<size_t>(m * k), 11);
      const Weights w = make_weights(dtype, n, k, 12);
      const auto bias = random_floats(static_cast<size_t>(n), 13);
      ThreadPool single(1);
      std::vector<float> rows(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i)
        linear(x.data() + i * k, 1, k, w.data(), dtype, n, bias.data(), rows.data() + i * n,
               single);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> batch(rows.size(), NAN);
        linear(x.data(), m, k, w.data(), dtype, n, bias.data(), batch.data(), pool);
        EXPECT_TRUE(bitwise_equal(batch.data(), rows.data(), rows.size())) << "threads=" << threads;
        // The same rows at other positions of a smaller batch.
        const int64_t first = 3, count = 5;
        std::vector<float> part(static_cast<size_t>(count * n), NAN);
        linear(x.data() + first * k, count, k, w.data(), dtype, n, bias.data(), part.data(), pool);
        EXPECT_TRUE(bitwise_equal(part.data(), rows.data() + first * n, part.size()))
            << "threads=" << threads;
      }
    }
  }
}

TEST_P(KernelsLinear, HandlesEmptyAndZeroLengthReductions) {
  ThreadPool pool(2);
  const std::vector<float> bias = {1.5f, -2.0f, 0.25f};
  std::vector<float> y(6, NAN);
  linear(nullptr, 2, 0, nullptr, DType::f32, 3, bias.data(), y.data(), pool);
  EXPECT_EQ(y, (std::vector<float>{1.5f, -2.0f, 0.25f, 1.5f, -2.0f, 0.25f}));
  linear(nullptr, 0, 4, nullptr, DType::bf16, 3, nullptr, nullptr, pool);  // no-op
}

TEST_P(KernelsLinear, RejectsUnsupportedWeightDtype) {
  ThreadPool pool(1);
  const std::vector<float> x(4, 1.0f);
  const std::vector<int8_t> w(8, 1);
  std::vector<float> y(2);
  EXPECT_THROW(linear(x.data(), 1, 4, w.data(), DType::i8, 2, nullptr, y.data(), pool), Error);
}

DI_INSTANTIATE_PER_ISA(KernelsLinear);

}  // namespace
}  // namespace deepinfer::kernels
