// kernels::linear with q5_0 / q5_1 and the k-quants q4_k / q5_k / q6_k: every ISA path (and
// both AVX-512 variants) bitwise equal to the scalar reference (kernels.h states the
// arithmetic; bitwise is stronger than the 1e-6 relative bound asked of integer paths), the
// reference within the x-rounding bound of the exact f64 product with the weights as
// core/quant_blocks.cpp dequantizes them (bit-exact with gguf-py), batch invariance, and rows
// that are not whole super-blocks refused with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quant_blocks.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::put_f16;
using testing::random_floats;

constexpr DType kTypes[] = {DType::q5_0, DType::q5_1, DType::q4_k, DType::q5_k, DType::q6_k};

bool is_k_quant(DType dtype) {
  return dtype == DType::q4_k || dtype == DType::q5_k || dtype == DType::q6_k;
}

// n rows of random blocks: random bytes (every bit pattern of quants, high bits, packed
// scales and mins is a valid block) with the f16 scales set to sane values of either sign:
// q5_0 d, q5_1 d and m, q4_k / q5_k d and dmin (times 6-bit scales and mins), q6_k d (times
// int8 group scales).
std::vector<uint8_t> random_blocks(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  const QuantTraits& traits = *block_traits(dtype);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f), small(0.0002f, 0.001f),
      offset(-0.1f, 0.1f);
  const auto sign = [&] { return rng() % 2 ? 1.0f : -1.0f; };
  std::vector<uint8_t> out(static_cast<size_t>(n) * dtype_bytes(dtype, k));
  for (auto& byte : out) byte = static_cast<uint8_t>(rng());
  for (size_t at = 0; at < out.size(); at += traits.block_bytes) {
    uint8_t* block = out.data() + at;
    switch (dtype) {
      case DType::q5_0:
        put_f16(block, sign() * scale(rng));
        break;
      case DType::q5_1:
        put_f16(block, scale(rng));
        put_f16(block + 2, offset(rng));
        break;
      case DType::q4_k:
      case DType::q5_k:
        put_f16(block, sign() * small(rng));
        put_f16(block + 2, sign() * small(rng));
        break;
      default:  // q6_k
        put_f16(block + 208, sign() * small(rng));
        break;
    }
  }
  return out;
}

std::vector<float> dequantized(DType dtype, const std::vector<uint8_t>& w, int64_t n, int64_t k) {
  std::vector<float> out(static_cast<size_t>(n * k));
  const QuantTraits& traits = *block_traits(dtype);
  for (int64_t j = 0; j < n; ++j)
    traits.dequantize_row(w.data() + static_cast<size_t>(j) * dtype_bytes(dtype, k),
                          out.data() + j * k, k);
  return out;
}

// Row lengths: 1, 3, 5 and 18 blocks of 32; 1, 2, 3 and 9 super-blocks of 256 (9: the
// whole-block kernels' panel chunks of 32 blocks, 32 + 32 + 8).
std::vector<int64_t> row_lengths(DType dtype) {
  if (is_k_quant(dtype)) return {256, 512, 768, 2304};
  return {32, 96, 160, 576};
}

class KernelsLinearKQuants : public testing::PerIsaTest {};

TEST_P(KernelsLinearKQuants, EqualsTheReferenceBitwise) {
  ThreadPool pool(2);
  uint32_t seed = 300;
  for (DType dtype : kTypes) {
    for (int64_t k : row_lengths(dtype)) {
      for (int64_t n : {1, 5, 17, 33}) {  // tails of every tile width
        for (int64_t m : {1, 2, 7, 33}) {
          const bool with_bias = (m + n) % 2 == 0;
          SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " m=" << m << " k=" << k
                                            << " n=" << n << " bias=" << with_bias);
          const auto x = random_floats(static_cast<size_t>(m * k), ++seed, -2.0f, 2.0f);
          const auto w = random_blocks(dtype, n, k, ++seed);
          const auto bias = random_floats(static_cast<size_t>(n), ++seed);
          const float* b = with_bias ? bias.data() : nullptr;
          std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size());
          linear(x.data(), m, k, w.data(), dtype, n, b, got.data(), pool);
          reference::linear(x.data(), m, k, w.data(), dtype, n, b, want.data());
          ASSERT_TRUE(bitwise_equal(got.data(), want.data(), got.size()));
        }
      }
    }
  }
}

// The reference against the exact f64 product with the dequantized weights: x is rounded to
// d_x * q with |error| <= d_x / 2 per element (d_x = max|x| / 127 of its 32-element block),
// so |y - exact| <= sum_b d_x,b / 2 * sum_{e in b} |w_e|, plus f32 rounding of the scale
// products and sums (a few ulps of the magnitude per term, 4 (k + 2) 2^-24 in all).
TEST(KernelsLinearKQuantsReference, IsWithinTheActivationRoundingOfTheExactProduct) {
  uint32_t seed = 17;
  for (DType dtype : kTypes) {
    const int64_t m = 3, k = 512, n = 9;
    const auto x = random_floats(static_cast<size_t>(m * k), ++seed, -3.0f, 3.0f);
    const auto w = random_blocks(dtype, n, k, ++seed);
    const auto wf = dequantized(dtype, w, n, k);
    std::vector<float> y(static_cast<size_t>(m * n));
    reference::linear(x.data(), m, k, w.data(), dtype, n, nullptr, y.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0.0, bound = 0.0, magnitude = 0.0;
        for (int64_t b = 0; b < k / 32; ++b) {
          double amax = 0.0, wsum = 0.0;
          for (int64_t e = b * 32; e < b * 32 + 32; ++e)
            amax = std::max<double>(amax, std::fabs(x[i * k + e]));
          for (int64_t e = b * 32; e < b * 32 + 32; ++e) {
            const double xe = x[i * k + e], we = wf[j * k + e];
            exact += xe * we;
            wsum += std::fabs(we);
            magnitude += std::fabs(xe * we) + std::fabs(we) * amax / 127.0;
          }
          bound += amax / 127.0 / 2.0 * wsum;
        }
        bound = bound * (1.0 + 1e-5) + 4.0 * (k + 2) * std::ldexp(1.0, -24) * magnitude;
        EXPECT_LE(std::fabs(y[i * n + j] - exact), bound)
            << dtype_name(dtype) << " row " << i << " col " << j;
        EXPECT_GT(std::fabs(exact), 0.0);
      }
    }
  }
}

TEST_P(KernelsLinearKQuants, IsBatchInvariantAcrossRowsPositionsAndThreads) {
  // m = 300 crosses the row-block size, so rows are also split between threads.
  for (DType dtype : kTypes) {
    const int64_t k = is_k_quant(dtype) ? 512 : 160;
    for (auto [m, n] : {std::tuple<int64_t, int64_t>{13, 33}, {300, 21}}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dtype) << " m=" << m << " k=" << k << " n=" << n);
      const auto x = random_floats(static_cast<size_t>(m * k), 21);
      const auto w = random_blocks(dtype, n, k, 22);
      const auto bias = random_floats(static_cast<size_t>(n), 23);
      ThreadPool single(1);
      std::vector<float> rows(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i)
        linear(x.data() + i * k, 1, k, w.data(), dtype, n, bias.data(), rows.data() + i * n,
               single);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> batch(rows.size(), NAN);
        linear(x.data(), m, k, w.data(), dtype, n, bias.data(), batch.data(), pool);
        EXPECT_TRUE(bitwise_equal(batch.data(), rows.data(), rows.size())) << "threads=" << threads;
        const int64_t first = 3, count = 5;
        std::vector<float> part(static_cast<size_t>(count * n), NAN);
        linear(x.data() + first * k, count, k, w.data(), dtype, n, bias.data(), part.data(), pool);
        EXPECT_TRUE(bitwise_equal(part.data(), rows.data() + first * n, part.size()))
            << "threads=" << threads;
      }
    }
  }
}

TEST_P(KernelsLinearKQuants, RefusesARowThatIsNotWholeSuperBlocks) {
  ThreadPool pool(1);
  const std::vector<float> x(288, 1.0f);
  const std::vector<uint8_t> w(1024, 0);
  std::vector<float> y(1);
  try {
    linear(x.data(), 1, 288, w.data(), DType::q4_k, 1, nullptr, y.data(), pool);
    ADD_FAILURE() << "k = 288 accepted for q4_k";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k weights need k to be a whole number of "
                                         "256-element blocks, got k = 288"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(KernelsLinearKQuants, ZeroAndNanActivationsBehaveAsInF32) {
  ThreadPool pool(1);
  const int64_t k = 256, n = 3;
  for (DType dtype : {DType::q4_k, DType::q6_k}) {
    const auto w = random_blocks(dtype, n, k, 5);
    std::vector<float> x(static_cast<size_t>(2 * k), 0.0f);
    x[k + 40] = NAN;  // second row, second block
    std::vector<float> y(static_cast<size_t>(2 * n));
    linear(x.data(), 2, k, w.data(), dtype, n, nullptr, y.data(), pool);
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(y[j], 0.0f) << dtype_name(dtype);
      EXPECT_TRUE(std::isnan(y[n + j])) << dtype_name(dtype);
    }
  }
}

DI_INSTANTIATE_PER_ISA(KernelsLinearKQuants);

// Both AVX-512 variants, called directly (dispatch picks VNNI where the CPU has it).
TEST(KernelsLinearKQuantsAvx512, BwAndVnniVariantsEqualTheReference) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  using RowsFn = void (*)(const detail::LinearArgs&, int64_t, int64_t, int64_t, int64_t);
  uint32_t seed = 60;
  for (DType dtype : kTypes) {
    // The whole-block types (q5_0, q4_k, q5_k) run linear_q8_*'s transposed kernel, the
    // per-lane ones linear_qk_*.
    const bool whole = is_whole_block_dtype(dtype);
    std::vector<RowsFn> variants = {whole ? &detail::avx512::linear_rows_q8
                                          : &detail::avx512::linear_rows_qk};
    if (cpu_has_avx512_vnni())
      variants.push_back(whole ? &detail::avx512::linear_rows_q8_vnni
                               : &detail::avx512::linear_rows_qk_vnni);
    const int64_t k = is_k_quant(dtype) ? 2304 : 160;
    // m = 12 with n = 37: the transposed panels (2 groups of 16 rows, the second partial).
    for (auto [m, n] : {std::tuple<int64_t, int64_t>{1, 9}, {5, 7}, {9, 4}, {12, 37}}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dtype) << " m=" << m << " k=" << k << " n=" << n);
      const auto x = random_floats(static_cast<size_t>(m * k), ++seed, -2.0f, 2.0f);
      const auto w = random_blocks(dtype, n, k, ++seed);
      std::vector<float> want(static_cast<size_t>(m * n));
      reference::linear(x.data(), m, k, w.data(), dtype, n, nullptr, want.data());
      std::vector<int8_t> q(static_cast<size_t>(m * k));
      std::vector<float> d(static_cast<size_t>(m * k / 4));
      std::vector<int32_t> t(static_cast<size_t>(m * k / 4));
      detail::quantize_x_blocks(x.data(), m, k, dtype, q.data(), d.data(), t.data());
      for (RowsFn rows : variants) {
        std::vector<float> got(want.size(), NAN);
        detail::LinearArgs args;
        args.k = k;
        args.w = w.data();
        args.w_dtype = dtype;
        args.n = n;
        args.y = got.data();
        args.xq = q.data();
        args.xd = d.data();
        args.xt = t.data();
        rows(args, 0, m, 0, n);
        EXPECT_TRUE(bitwise_equal(got.data(), want.data(), got.size()))
            << (rows == variants.front() ? "AVX-512BW" : "AVX-512 VNNI");
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
