// kernels::linear on packed weights (pack_weights): against the scalar reference on shapes
// with tails in m, n (panels of 32) and k (odd k, k chunks of 256 / 512), bitwise batch
// invariance (m, row position, threads, row blocks of 256), the bf16-activation variant, and
// AVX2 = AVX-512 bitwise, and the fallback when the ISA or the dtype has no packed kernel.
#include <gtest/gtest.h>

#include <cmath>
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

struct Weights {
  DType dtype;
  std::vector<float> f32;      // the exact values (what the reference multiplies by)
  std::vector<uint16_t> bits;  // bf16 storage
  const void* data() const {
    return dtype == DType::f32 ? static_cast<const void*>(f32.data()) : bits.data();
  }
};

Weights make_weights(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  Weights w{dtype, random_floats(static_cast<size_t>(n * k), seed), {}};
  if (dtype == DType::bf16) {
    w.bits.resize(w.f32.size());
    convert_from_f32(w.f32.data(), w.bits.data(), dtype, w.f32.size());
    convert_to_f32(w.bits.data(), dtype, w.f32.data(), w.f32.size());
  }
  return w;
}

class PrecisionGuard {
 public:
  explicit PrecisionGuard(MatmulPrecision p) { set_matmul_precision(p); }
  ~PrecisionGuard() { set_matmul_precision(MatmulPrecision::f32); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;
};

using testing::PackingOn;

// Packed weights for the kernels of the active ISA. AVX2 does not pack bf16 by policy
// (pack_weights) but runs bf16 panels packed under AVX-512, so its kernel is tested too.
PackedWeights pack_for_test(const void* w, DType dtype, int64_t n, int64_t k) {
  const PackingOn packing;
  PackedWeights packed = pack_weights(w, dtype, n, k);
  if (!packed.defined() && active_isa() != Isa::scalar && isa_supported(Isa::avx512)) {
    const Isa isa = active_isa();
    set_active_isa(Isa::avx512);
    packed = pack_weights(w, dtype, n, k);
    set_active_isa(isa);
  }
  return packed;
}

// Every test runs under each ISA this CPU supports; scalar has no packed kernel.
class KernelsLinearPacked : public testing::PerIsaTest {
 protected:
  bool no_packed_kernel() const { return GetParam() == Isa::scalar; }
};

// |got - want| within two summation orders' rounding of the terms x * w (+ bias).
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<float>& x, const Weights& w, const float* bias, int64_t m,
                  int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double magnitude = bias ? std::fabs(bias[j]) : 0.0;
      for (int64_t p = 0; p < k; ++p) magnitude += std::fabs(x[i * k + p] * w.f32[j * k + p]);
      const double tol = 2.0 * (k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30;
      const size_t at = static_cast<size_t>(i * n + j);
      ASSERT_LE(std::fabs(got[at] - want[at]), tol) << "at row " << i << " col " << j;
    }
  }
}

std::vector<float> round_to_bf16(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return out;
}

TEST_P(KernelsLinearPacked, MatchesReferenceOnShapesWithTails) {
  if (no_packed_kernel()) GTEST_SKIP() << "scalar: nothing is packed";
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (MatmulPrecision precision : {MatmulPrecision::f32, MatmulPrecision::bf16}) {
    PrecisionGuard guard(precision);
    for (DType dtype : {DType::f32, DType::bf16}) {
      if (precision == MatmulPrecision::bf16 && dtype == DType::f32) continue;  // unaffected
      for (auto [k, n] :
           {std::tuple<int64_t, int64_t>{1, 5}, {3, 33}, {17, 64}, {300, 70}, {601, 37}}) {
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 64, 130}) {
          const bool with_bias = (m + k) % 2 == 1;
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(dtype) << " precision=" << matmul_precision_name(precision)
                       << " m=" << m << " k=" << k << " n=" << n << " bias=" << with_bias);
          const auto x = random_floats(static_cast<size_t>(m * k), ++seed);
          const Weights w = make_weights(dtype, n, k, ++seed);
          const auto bias = random_floats(static_cast<size_t>(n), ++seed);
          const float* b = with_bias ? bias.data() : nullptr;
          const PackedWeights packed = pack_for_test(w.data(), dtype, n, k);
          if (!packed.defined()) continue;  // AVX2-only CPU, bf16: not packed
          std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size());
          linear(x.data(), m, packed, b, got.data(), pool);
          // bf16 activations: the reference on x rounded to bf16, as the kernel rounds it.
          const bool rounded = precision == MatmulPrecision::bf16;
          const auto xr = rounded ? round_to_bf16(x) : x;
          reference::linear(xr.data(), m, k, w.data(), dtype, n, b, want.data());
          expect_close(got, want, xr, w, b, m, k, n);
        }
      }
    }
  }
}

TEST_P(KernelsLinearPacked, IsBatchInvariantAcrossRowsPositionsAndThreads) {
  if (no_packed_kernel()) GTEST_SKIP() << "scalar: nothing is packed";
  for (MatmulPrecision precision : {MatmulPrecision::f32, MatmulPrecision::bf16}) {
    PrecisionGuard guard(precision);
    for (DType dtype : {DType::f32, DType::bf16}) {
      // k = 1100 spans several k chunks; m = 300 crosses the 256-row block.
      for (auto [m, k, n] :
           {std::tuple<int64_t, int64_t, int64_t>{13, 67, 33}, {20, 1100, 70}, {300, 33, 100}}) {
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(dtype) << " precision=" << matmul_precision_name(precision)
                     << " m=" << m << " k=" << k << " n=" << n);
        const auto x = random_floats(static_cast<size_t>(m * k), 11);
        const Weights w = make_weights(dtype, n, k, 12);
        const auto bias = random_floats(static_cast<size_t>(n), 13);
        const PackedWeights packed = pack_for_test(w.data(), dtype, n, k);
        if (!packed.defined()) continue;  // AVX2-only CPU, bf16: not packed
        ThreadPool single(1);
        std::vector<float> rows(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i)
          linear(x.data() + i * k, 1, packed, bias.data(), rows.data() + i * n, single);
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> batch(rows.size(), NAN);
          linear(x.data(), m, packed, bias.data(), batch.data(), pool);
          EXPECT_TRUE(bitwise_equal(batch.data(), rows.data(), rows.size()))
              << "threads=" << threads;
          // The same rows at other positions of smaller batches (other tile shapes).
          for (auto [first, count] : {std::pair<int64_t, int64_t>{3, 5}, {1, 9}}) {
            std::vector<float> part(static_cast<size_t>(count * n), NAN);
            linear(x.data() + first * k, count, packed, bias.data(), part.data(), pool);
            EXPECT_TRUE(bitwise_equal(part.data(), rows.data() + first * n, part.size()))
                << "threads=" << threads << " rows " << first << "+" << count;
          }
        }
      }
    }
  }
}

DI_INSTANTIATE_PER_ISA(KernelsLinearPacked);

TEST(KernelsLinearPackedIsas, PacksOnlyWhereAKernelExists) {
  const PackingOn packing_on;
  const Weights w16 = make_weights(DType::f16, 4, 8, 1);
  EXPECT_FALSE(pack_weights(w16.data(), DType::f16, 4, 8).defined());  // f16: as stored
  const Weights b16 = make_weights(DType::bf16, 4, 8, 3);
  const Weights w = make_weights(DType::f32, 4, 8, 2);
  for (Isa isa : supported_isas()) {  // f32 and bf16: packed on AVX2 and AVX-512
    testing::IsaGuard guard(isa);
    EXPECT_EQ(pack_weights(b16.data(), DType::bf16, 4, 8).defined(), isa != Isa::scalar)
        << isa_name(isa);
    EXPECT_EQ(pack_weights(w.data(), DType::f32, 4, 8).defined(), isa != Isa::scalar)
        << isa_name(isa);
  }
  const bool packing = weight_packing();
  set_weight_packing(false);  // A/B runs: everything as stored
  EXPECT_FALSE(pack_weights(w.data(), DType::f32, 4, 8).defined());
  set_weight_packing(packing);
}

TEST(KernelsLinearPackedIsas, FallsBackToTheStoredMatrixUnderScalar) {
  const PackingOn packing_on;
  if (best_isa() == Isa::scalar) GTEST_SKIP() << "no AVX2 on this CPU: nothing is packed";
  const int64_t m = 5, k = 40, n = 9;
  const auto x = random_floats(static_cast<size_t>(m * k), 21);
  const Weights w = make_weights(DType::f32, n, k, 22);
  const PackedWeights packed = pack_weights(w.data(), DType::f32, n, k);
  ASSERT_TRUE(packed.defined());
  EXPECT_EQ(packed.source(), w.data());
  ThreadPool pool(2);
  testing::IsaGuard guard(Isa::scalar);
  std::vector<float> got(static_cast<size_t>(m * n)), want(got.size());
  linear(x.data(), m, packed, nullptr, got.data(), pool);
  linear(x.data(), m, k, w.data(), DType::f32, n, nullptr, want.data(), pool);
  EXPECT_TRUE(bitwise_equal(got.data(), want.data(), got.size()));
}

// One layout and one chain per output: AVX2 and AVX-512 give the same bits (exact paths).
TEST(KernelsLinearPackedIsas, Avx2AndAvx512AreBitwiseEqual) {
  const PackingOn packing_on;
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool(2);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 601, 70},
                           {3, 67, 33},
                           {8, 300, 100},
                           {40, 1100, 37}}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dtype) << " m=" << m << " k=" << k << " n=" << n);
      const auto x = random_floats(static_cast<size_t>(m * k), 31);
      const Weights w = make_weights(dtype, n, k, 32);
      const auto bias = random_floats(static_cast<size_t>(n), 33);
      const PackedWeights packed = pack_weights(w.data(), dtype, n, k);
      std::vector<float> wide(static_cast<size_t>(m * n), NAN), narrow(wide.size(), NAN);
      {
        testing::IsaGuard guard(Isa::avx512);
        linear(x.data(), m, packed, bias.data(), wide.data(), pool);
      }
      {
        testing::IsaGuard guard(Isa::avx2);
        linear(x.data(), m, packed, bias.data(), narrow.data(), pool);
      }
      EXPECT_TRUE(bitwise_equal(wide.data(), narrow.data(), wide.size()));
    }
  }
}

TEST(KernelsLinearPackedIsas, RefusesEmptyPackedWeights) {
  ThreadPool pool(1);
  float x = 1.0f, y = 0.0f;
  EXPECT_THROW(linear(&x, 1, PackedWeights{}, nullptr, &y, pool), Error);
}

}  // namespace
}  // namespace deepinfer::kernels
