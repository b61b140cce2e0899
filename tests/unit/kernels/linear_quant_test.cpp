// kernels::linear with ggml block weights (q8_0, q4_0, q4_1): every ISA path bitwise equal to
// the scalar reference (kernels.h states the arithmetic), the reference within the x
// quantization bound of the exact product with the dequantized weights, batch invariance,
// and both AVX-512 variants (VNNI and BW) on CPUs that have them.
#include <gtest/gtest.h>

#include <algorithm>
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
#include "kernels/packed_weights.h"
#include "kernels/reference.h"
#include "kernels/whole_block_layout.h"

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::put_f16;
using testing::random_floats;

constexpr DType kBlockTypes[] = {DType::q8_0, DType::q4_0, DType::q4_1};

// n rows of k / 32 random blocks: scales in [0.002, 0.03] (either sign for q4_1's m), random
// quants over the whole range (q8_0 includes -128, which the signed tricks must get right).
std::vector<uint8_t> random_blocks(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  const QuantTraits& traits = *block_traits(dtype);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f), offset(-0.1f, 0.1f);
  std::vector<uint8_t> out(static_cast<size_t>(n * (k / 32)) * traits.block_bytes);
  for (size_t at = 0; at < out.size(); at += traits.block_bytes) {
    uint8_t* block = out.data() + at;
    put_f16(block, scale(rng));
    size_t quants = 2;
    if (dtype == DType::q4_1) {
      put_f16(block + 2, offset(rng));
      quants = 4;
    }
    for (size_t b = quants; b < traits.block_bytes; ++b) block[b] = static_cast<uint8_t>(rng());
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

class KernelsLinearBlocks : public testing::PerIsaTest {};

TEST_P(KernelsLinearBlocks, EqualsTheReferenceBitwise) {
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (DType dtype : kBlockTypes) {
    for (int64_t k : {32, 64, 96, 160, 576}) {  // 1, 2, 3, 5, 18 blocks
      for (int64_t n : {1, 5, 17, 33}) {
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) {
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

// The whole-block types' GEMM (q4_0, q5_0, q8_0) transposes panels of 16 (AVX2) or 32 (AVX-512)
// weight rows, 16 or 32 blocks at a time, from 8 x rows on, and streams smaller calls in
// tiles of up to 4 rows: k of 70 blocks (several panel chunks, the last partial); n of one group
// (8, 16), with a partial group (9, 23, 37, 50); m across the streaming tiles (1 .. 7), the
// panel threshold and its row tiles (8 .. 33).
TEST_P(KernelsLinearBlocks, WholeBlockPanelsAndStreamingEqualTheReferenceBitwise) {
  ThreadPool pool(2);
  uint32_t seed = 900;
  const int64_t k = 70 * 32;
  for (DType dtype : {DType::q4_0, DType::q5_0, DType::q8_0}) {
    for (int64_t n : {8, 9, 16, 23, 37, 50}) {
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 12, 21, 33}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " m=" << m << " n=" << n);
        const auto x = random_floats(static_cast<size_t>(m * k), ++seed, -2.0f, 2.0f);
        const auto w = random_blocks(dtype, n, k, ++seed);
        const auto bias = random_floats(static_cast<size_t>(n), ++seed);
        const float* b = m % 2 == 0 ? bias.data() : nullptr;
        std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size());
        linear(x.data(), m, k, w.data(), dtype, n, b, got.data(), pool);
        reference::linear(x.data(), m, k, w.data(), dtype, n, b, want.data());
        ASSERT_TRUE(bitwise_equal(got.data(), want.data(), got.size()));
      }
    }
  }
}

// One block of the largest (even rows) or smallest (odd rows) quants of a whole-block type, with
// d = 0.5, and that quant's integer value: q4_0 nibbles 15 / 0 (7 / -8), q5_0 31 / 0 (15 / -16),
// q8_0 127 / -128.
int extreme_block(DType dtype, bool largest, uint8_t* block) {
  const QuantTraits& traits = *block_traits(dtype);
  put_f16(block, 0.5f);
  const uint8_t fill = dtype == DType::q8_0 ? (largest ? 0x7f : 0x80) : (largest ? 0xff : 0x00);
  std::fill(block + 2, block + traits.block_bytes, fill);
  if (dtype == DType::q4_0) return largest ? 7 : -8;
  if (dtype == DType::q5_0) return largest ? 15 : -16;
  return largest ? 127 : -128;
}

// The extremes of the whole-block integer dots against x = +-1 everywhere (q_x = +-127), where
// the AVX2 kernel's int16 partial sums reach 16 * 15 * 127 = 30480 (q4_0) and 8 * 31 * 127 =
// 31496 (q5_0) and q8_0's -128 * -127 must not wrap. Two blocks with d_w = 0.5 and d_x = 1 / 127
// give y = 2 * 0.5 / 127 * 32 * w * 127 = 32 w (w the quant's value), up to the rounding of d_x.
TEST_P(KernelsLinearBlocks, WholeBlockExtremeQuantsAreExact) {
  ThreadPool pool(2);
  const int64_t k = 64, n = 16;
  for (DType dtype : {DType::q4_0, DType::q5_0, DType::q8_0}) {
    const size_t bytes = block_traits(dtype)->block_bytes;
    std::vector<uint8_t> w(static_cast<size_t>(n * (k / 32)) * bytes);
    int value[2] = {};
    for (int64_t j = 0; j < n; ++j)
      for (int64_t b = 0; b < k / 32; ++b)
        value[j % 2] = extreme_block(dtype, j % 2 == 0,
                                     w.data() + static_cast<size_t>(j * (k / 32) + b) * bytes);
    for (int64_t m : {1, 3, 9}) {
      std::vector<float> x(static_cast<size_t>(m * k));
      for (int64_t i = 0; i < m; ++i)
        std::fill(x.begin() + i * k, x.begin() + (i + 1) * k, i % 2 == 0 ? 1.0f : -1.0f);
      std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size());
      linear(x.data(), m, k, w.data(), dtype, n, nullptr, got.data(), pool);
      reference::linear(x.data(), m, k, w.data(), dtype, n, nullptr, want.data());
      ASSERT_TRUE(bitwise_equal(got.data(), want.data(), got.size()))
          << dtype_name(dtype) << " m=" << m;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const float expected = (i % 2 == 0 ? 32.0f : -32.0f) * static_cast<float>(value[j % 2]);
          EXPECT_NEAR(got[i * n + j], expected, 1e-4f * std::fabs(expected))
              << dtype_name(dtype) << " m=" << m << " row " << i << " col " << j;
        }
      }
    }
  }
}

// The reference against the exact product with the dequantized weights: x is rounded to
// d_x * q with |error| <= d_x / 2 per element (d_x = max|x| / 127 of its block), so
// |y - exact| <= sum_b d_x,b / 2 * sum_{e in b} |w_e|, plus f32 rounding of the sums.
TEST(KernelsLinearBlocksReference, IsWithinTheActivationRoundingOfTheExactProduct) {
  uint32_t seed = 7;
  for (DType dtype : kBlockTypes) {
    const int64_t m = 3, k = 256, n = 9;
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
          for (int64_t e = b * 32; e < b * 32 + 32; ++e) {
            const double xe = x[i * k + e], we = wf[j * k + e];
            exact += xe * we;
            amax = std::max(amax, std::fabs(xe));
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

TEST_P(KernelsLinearBlocks, IsBatchInvariantAcrossRowsPositionsAndThreads) {
  // m = 300 crosses the row-block size, so rows are also split between threads.
  for (DType dtype : kBlockTypes) {
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{13, 96, 33},
                           {11, 576, 70},
                           {300, 64, 21},
                           {9, 2240, 37}}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dtype) << " m=" << m << " k=" << k << " n=" << n);
      const auto x = random_floats(static_cast<size_t>(m * k), 11);
      const auto w = random_blocks(dtype, n, k, 12);
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
        const int64_t first = 3, count = 5;
        std::vector<float> part(static_cast<size_t>(count * n), NAN);
        linear(x.data() + first * k, count, k, w.data(), dtype, n, bias.data(), part.data(), pool);
        EXPECT_TRUE(bitwise_equal(part.data(), rows.data() + first * n, part.size()))
            << "threads=" << threads;
      }
    }
  }
}

// linear_grouped: each job bitwise its own linear() call, whatever the other jobs (an empty
// one, one past the 256-row block, decode-sized ones) and the thread count.
TEST_P(KernelsLinearBlocks, GroupedJobsEqualTheirOwnLinearCalls) {
  const int64_t k = 256, n = 37;
  uint32_t seed = 500;
  for (DType dtype : {DType::q8_0, DType::q4_k, DType::q4_1}) {
    const int64_t ms[] = {1, 0, 300, 7, 1};
    std::vector<std::vector<float>> x, want, got;
    std::vector<std::vector<uint8_t>> w;
    std::vector<LinearJob> jobs;
    ThreadPool single(1);
    for (int64_t m : ms) {
      x.push_back(random_floats(static_cast<size_t>(m * k), ++seed, -2.0f, 2.0f));
      w.push_back(random_blocks(dtype, n, k, ++seed));
      want.emplace_back(static_cast<size_t>(m * n));
      linear(x.back().data(), m, k, w.back().data(), dtype, n, nullptr, want.back().data(), single);
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      got.assign(want.size(), {});
      jobs.clear();
      for (size_t g = 0; g < want.size(); ++g) {
        got[g].assign(want[g].size(), NAN);
        jobs.push_back({x[g].data(), ms[g], w[g].data(), got[g].data()});
      }
      linear_grouped(jobs, k, dtype, n, pool);
      for (size_t g = 0; g < want.size(); ++g)
        EXPECT_TRUE(bitwise_equal(got[g].data(), want[g].data(), got[g].size()))
            << dtype_name(dtype) << " job " << g << " threads " << threads;
    }
  }
}

TEST_P(KernelsLinearBlocks, RefusesARowThatIsNotWholeBlocks) {
  ThreadPool pool(1);
  const std::vector<float> x(48, 1.0f);
  const std::vector<uint8_t> w(64, 0);
  std::vector<float> y(1);
  try {
    linear(x.data(), 1, 48, w.data(), DType::q4_0, 1, nullptr, y.data(), pool);
    ADD_FAILURE() << "k = 48 accepted for q4_0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("whole number of 32-element blocks"), std::string::npos)
        << e.what();
  }
}

TEST_P(KernelsLinearBlocks, ZeroAndNanActivationsBehaveAsInF32) {
  ThreadPool pool(1);
  const int64_t k = 64, n = 3;
  const auto w = random_blocks(DType::q4_1, n, k, 5);
  std::vector<float> x(static_cast<size_t>(2 * k), 0.0f);
  x[k + 40] = NAN;  // second row, second block
  std::vector<float> y(static_cast<size_t>(2 * n));
  linear(x.data(), 2, k, w.data(), DType::q4_1, n, nullptr, y.data(), pool);
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(y[j], 0.0f);
    EXPECT_TRUE(std::isnan(y[n + j]));
  }
}

DI_INSTANTIATE_PER_ISA(KernelsLinearBlocks);

// Both AVX-512 variants, called directly (dispatch picks VNNI where the CPU has it).
TEST(KernelsLinearBlocksAvx512, BwAndVnniVariantsEqualTheReference) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  using RowsFn = void (*)(const detail::LinearArgs&, int64_t, int64_t, int64_t, int64_t);
  std::vector<RowsFn> variants = {&detail::avx512::linear_rows_q8};
  if (cpu_has_avx512_vnni()) variants.push_back(&detail::avx512::linear_rows_q8_vnni);
  uint32_t seed = 40;
  for (DType dtype : {DType::q4_0, DType::q5_0, DType::q8_0, DType::q4_1}) {
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 96, 9},
                           {5, 160, 7},
                           {9, 576, 4},
                           {2, 2240, 20},
                           {12, 2240, 37},
                           {33, 1088, 50}}) {
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

// The ISAs that read repacked blocks, where this CPU has them.
std::vector<Isa> repacking_isas() {
  std::vector<Isa> isas;
  for (Isa isa : supported_isas())
    if (detail::wb::reads_repacked_layout(isa)) isas.push_back(isa);
  return isas;
}

// The AVX-512 BW variant (dispatch picks VNNI where the CPU has it) on repacked w into y.
void avx512_bw_rows(const float* x, int64_t m, int64_t k, const PackedWeights& w, float* y) {
  std::vector<int8_t> q(static_cast<size_t>(m * k));
  std::vector<float> d(static_cast<size_t>(m * k / 4));
  std::vector<int32_t> t(static_cast<size_t>(m * k / 4));
  detail::quantize_x_blocks(x, m, k, w.dtype(), q.data(), d.data(), t.data());
  detail::LinearArgs args;
  args.k = k;
  args.w = w.panels();
  args.w_dtype = w.dtype();
  args.w_repacked = true;
  args.n = w.n();
  args.y = y;
  args.xq = q.data();
  args.xd = d.data();
  args.xt = t.data();
  detail::avx512::linear_rows_q8(args, 0, m, 0, w.n());
}

// q4_0, q5_0, q8_0 and q4_k repacked at load for AVX2 and AVX-512 (pack_weights,
// kernels/whole_block_layout.h) give the kernels the vectors they build from the stored rows, so
// the same bits: streaming (m < 8) and panel calls, n with tails (the last unit zero-padded: 8
// rows on AVX2, 16 on AVX-512, whose layout interleaves pairs of groups), one and two threads,
// both AVX-512 variants. Run under an ISA of the other layout (or scalar), linear() reads the
// stored matrix.
TEST(KernelsLinearRepacked, RepackedEqualsTheStoredMatrixBitwise) {
  if (repacking_isas().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  const bool packing = weight_packing();
  set_weight_packing(true);
  uint32_t seed = 700;
  for (const DType type : {DType::q4_0, DType::q5_0, DType::q8_0, DType::q4_k}) {
    const int64_t unit = type == DType::q4_k ? 8 : 1;  // k in 256s for the k-quant
    for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 64, 8},
                                                                                    {1, 256, 37},
                                                                                    {3, 96, 16},
                                                                                    {2, 64, 24},
                                                                                    {7, 128, 70},
                                                                                    {8, 160, 45},
                                                                                    {9, 64, 40},
                                                                                    {33, 512, 9}}) {
      const int64_t kk = k * unit;
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(type) << " m=" << m << " k=" << kk << " n=" << n);
      const auto x = random_floats(static_cast<size_t>(m * kk), ++seed, -2.0f, 2.0f);
      const auto w = random_blocks(type, n, kk, ++seed);
      const auto bias = random_floats(static_cast<size_t>(n), ++seed);
      for (Isa packing_isa : repacking_isas()) {
        PackedWeights packed;
        {
          testing::IsaGuard guard(packing_isa);
          packed = pack_weights(w.data(), type, n, kk);
          EXPECT_TRUE(reads_repacked_blocks(packed));
        }
        ASSERT_TRUE(packed.defined());
        EXPECT_EQ(packed.source(), w.data());
        const int64_t rows = packing_isa == Isa::avx512 ? 16 : 8;
        EXPECT_EQ(packed.repacked_rows(), rows);
        EXPECT_EQ(packed.bytes(),
                  static_cast<size_t>((n + rows - 1) / rows * rows) * dtype_bytes(type, kk));
        for (Isa isa : supported_isas()) {
          testing::IsaGuard guard(isa);
          for (int threads : {1, 2}) {
            SCOPED_TRACE(::testing::Message() << "packed under " << isa_name(packing_isa) << ", "
                                              << isa_name(isa) << ", " << threads << " threads");
            ThreadPool pool(threads);
            std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size(), NAN);
            linear(x.data(), m, packed, bias.data(), got.data(), pool);
            linear(x.data(), m, kk, w.data(), type, n, bias.data(), want.data(), pool);
            EXPECT_TRUE(testing::bitwise_equal(got.data(), want.data(), got.size()));
            EXPECT_EQ(reads_repacked_blocks(packed), isa == packing_isa);
            if (isa == Isa::avx512 && packing_isa == Isa::avx512 && threads == 1) {
              std::vector<float> bw(got.size(), NAN), stored(got.size(), NAN);
              avx512_bw_rows(x.data(), m, kk, packed, bw.data());
              linear(x.data(), m, kk, w.data(), type, n, nullptr, stored.data(), pool);
              EXPECT_TRUE(testing::bitwise_equal(bw.data(), stored.data(), bw.size()))
                  << "AVX-512BW";
            }
          }
        }
      }
    }
  }
  {
    testing::IsaGuard guard(Isa::scalar);  // no repacked kernel: as stored
    const auto w = random_blocks(DType::q4_0, 8, 64, 9);
    EXPECT_FALSE(pack_weights(w.data(), DType::q4_0, 8, 64).defined());
  }
  set_weight_packing(packing);
}

// linear_grouped over repacked stacks (ExpertStack::repack_blocks: one pack_weights() of the
// whole [experts * rows, k] stack of experts of whole units, each expert at its stored byte
// offset) equals each expert's linear() on the stored matrix, bit for bit, with 0, 1 and several
// rows per expert.
TEST(KernelsLinearRepacked, GroupedExpertsReadTheirRowsRepackedBitwise) {
  if (repacking_isas().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  const bool packing = weight_packing();
  set_weight_packing(true);
  uint32_t seed = 900;
  for (Isa isa : repacking_isas()) {
    testing::IsaGuard guard(isa);
    for (const DType type : {DType::q4_0, DType::q5_0, DType::q8_0, DType::q4_k}) {
      SCOPED_TRACE(::testing::Message() << isa_name(isa) << ", " << dtype_name(type));
      const int64_t experts = 4, n = 32, k = type == DType::q4_k ? 512 : 96;
      ASSERT_EQ(n % repacked_row_unit(), 0);
      const auto w = random_blocks(type, experts * n, k, ++seed);
      const PackedWeights packed = pack_weights(w.data(), type, experts * n, k);
      ASSERT_TRUE(reads_repacked_blocks(packed));
      const size_t each = static_cast<size_t>(n) * dtype_bytes(type, k);
      const std::vector<int64_t> rows{1, 0, 3, 9};
      std::vector<std::vector<float>> x, got, want;
      std::vector<LinearJob> jobs;
      for (int64_t e = 0; e < experts; ++e) {
        x.push_back(random_floats(static_cast<size_t>(std::max<int64_t>(1, rows[e]) * k), ++seed));
        got.emplace_back(static_cast<size_t>(rows[e] * n), NAN);
        want.emplace_back(got.back().size(), NAN);
        jobs.push_back({x.back().data(), rows[e],
                        static_cast<const uint8_t*>(packed.panels()) + e * each,
                        got.back().data()});
      }
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        linear_grouped(jobs, k, type, n, pool, true);
        for (int64_t e = 0; e < experts; ++e) {
          linear(x[e].data(), rows[e], k, w.data() + e * each, type, n, nullptr, want[e].data(),
                 pool);
          EXPECT_TRUE(testing::bitwise_equal(got[e].data(), want[e].data(), got[e].size()))
              << "expert " << e << ", " << threads << " threads";
        }
      }
    }
  }
  set_weight_packing(packing);
}

}  // namespace
}  // namespace deepinfer::kernels
