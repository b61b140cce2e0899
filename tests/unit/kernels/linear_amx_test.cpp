// The AMX-INT8 block-weight GEMM (linear_whole_block_amx.cpp): bitwise the AVX-512 VNNI path
// and the scalar reference for every whole-block type, stored and repacked, tails of rows,
// columns and panel chunks included; batch invariant across the AMX / VNNI switch at
// kAmxMinRows; the MoE grouped GEMM; the AMX-BF16 packed linear with bf16 activations (within
// the f32 summation bound of the rounded-x reference, batch invariant); and the fallback where the
// CPU has no AMX. The AMX tests skip, saying why, on CPUs without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
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

namespace deepinfer::kernels {
namespace {

using testing::bitwise_equal;
using testing::put_f16;
using testing::random_floats;

constexpr DType kWholeBlockTypes[] = {DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k,
                                      DType::q5_k};

bool is_k_quant(DType dtype) {
  return dtype == DType::q4_k || dtype == DType::q5_k;
}

// Random bytes (every quant, fifth bit and packed scale pattern is a valid block, q8_0's -128
// included) with sane f16 scales of either sign: d at byte 0, and the k-quants' dmin at 2.
std::vector<uint8_t> random_blocks(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  const QuantTraits& traits = *block_traits(dtype);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f), small(0.0002f, 0.001f);
  const auto sign = [&] { return rng() % 2 ? 1.0f : -1.0f; };
  std::vector<uint8_t> out(static_cast<size_t>(n) * dtype_bytes(dtype, k));
  for (auto& byte : out) byte = static_cast<uint8_t>(rng());
  for (size_t at = 0; at < out.size(); at += traits.block_bytes) {
    if (is_k_quant(dtype)) {
      put_f16(out.data() + at, sign() * small(rng));
      put_f16(out.data() + at + 2, sign() * small(rng));
    } else {
      put_f16(out.data() + at, sign() * scale(rng));
    }
  }
  return out;
}

// Forces AMX on or off for the guard's lifetime.
class AmxGuard {
 public:
  explicit AmxGuard(bool on) { set_amx(on); }
  ~AmxGuard() { clear_amx_override(); }
  AmxGuard(const AmxGuard&) = delete;
  AmxGuard& operator=(const AmxGuard&) = delete;
};

// The int8 tile kernel's calls so far (tile_config_amx.cpp counts them): a test that compares the
// tiles with VNNI must also see that they ran, since their results are the same bits.
int64_t int8_tile_calls() {
  return detail::avx512::tile_calls(detail::avx512::AmxTiles::int8_blocks);
}

std::vector<float> run_linear(const std::vector<float>& x, int64_t m, int64_t k, const void* w,
                              DType dtype, int64_t n, const float* bias, bool amx, int threads) {
  testing::IsaGuard isa(Isa::avx512);
  AmxGuard guard(amx);
  ThreadPool pool(threads);
  std::vector<float> y(static_cast<size_t>(m * n), NAN);
  linear(x.data(), m, k, w, dtype, n, bias, y.data(), pool);
  return y;
}

// (m, k in blocks of the type's granule, n): one whole tile; row, column and chunk tails (34
// blocks: a chunk of 32 then 2, an odd count for the two-block pipeline); many tiles.
// 300 rows: a second row block of the thread split (its first tile is tile 16).
const std::vector<std::tuple<int64_t, int64_t, int64_t>> kShapes = {
    {16, 1, 16}, {17, 2, 20}, {31, 34, 33}, {40, 3, 48}, {100, 5, 7}, {64, 9, 64}, {300, 3, 24}};

TEST(KernelsLinearAmx, EqualsVnniAndTheReferenceBitwise) {
  if (!cpu_has_amx()) GTEST_SKIP() << "this CPU (or its OS) offers no AMX-INT8 tiles";
  uint32_t seed = 4700;
  for (DType dtype : kWholeBlockTypes) {
    const int64_t granule = is_k_quant(dtype) ? 256 : 32;
    for (const auto& [m, units, n] : kShapes) {
      const int64_t k = units * granule;
      if (is_k_quant(dtype) && units > 9) continue;
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dtype) << " m=" << m << " k=" << k << " n=" << n);
      const auto x = random_floats(static_cast<size_t>(m * k), ++seed, -2.0f, 2.0f);
      const auto w = random_blocks(dtype, n, k, ++seed);
      const auto bias = random_floats(static_cast<size_t>(n), ++seed);
      std::vector<float> want(static_cast<size_t>(m * n), NAN);
      reference::linear(x.data(), m, k, w.data(), dtype, n, bias.data(), want.data());
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << threads << " threads");
        const int64_t calls = int8_tile_calls();
        const auto amx = run_linear(x, m, k, w.data(), dtype, n, bias.data(), true, threads);
        EXPECT_GT(int8_tile_calls(), calls) << "the tiles did not run";
        const auto vnni = run_linear(x, m, k, w.data(), dtype, n, bias.data(), false, threads);
        EXPECT_TRUE(bitwise_equal(amx.data(), want.data(), want.size())) << "AMX vs reference";
        EXPECT_TRUE(bitwise_equal(vnni.data(), want.data(), want.size())) << "VNNI vs reference";
      }
    }
  }
}

TEST(KernelsLinearAmx, ExtremeQuantsAreExact) {
  if (!cpu_has_amx()) GTEST_SKIP() << "this CPU (or its OS) offers no AMX-INT8 tiles";
  // x of one sign at full scale (q_x = +-127) against q8_0 weights of -128 and 127: the block
  // dots reach 32 * 128 * 127 and must still equal the reference.
  const int64_t m = 18, k = 64, n = 16;
  std::vector<uint8_t> w(static_cast<size_t>(n) * dtype_bytes(DType::q8_0, k));
  for (size_t at = 0; at < w.size(); at += 34) {
    put_f16(w.data() + at, 0.01f);
    for (int e = 0; e < 32; ++e) w[at + 2 + e] = (at / 34 + e) % 3 == 0 ? 0x7f : 0x80;
  }
  std::vector<float> x(static_cast<size_t>(m * k));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / k) % 2 ? 1.5f : -1.5f;
  std::vector<float> want(static_cast<size_t>(m * n), NAN);
  reference::linear(x.data(), m, k, w.data(), DType::q8_0, n, nullptr, want.data());
  const auto got = run_linear(x, m, k, w.data(), DType::q8_0, n, nullptr, true, 1);
  EXPECT_TRUE(bitwise_equal(got.data(), want.data(), want.size()));
}

TEST(KernelsLinearAmx, RepackedWeightsEqualTheStoredOnesBitwise) {
  if (!cpu_has_amx()) GTEST_SKIP() << "this CPU (or its OS) offers no AMX-INT8 tiles";
  const testing::PackingOn packing;
  testing::IsaGuard isa(Isa::avx512);
  AmxGuard guard(true);
  uint32_t seed = 4800;
  for (DType dtype : {DType::q4_0, DType::q5_0, DType::q8_0, DType::q4_k}) {
    const int64_t m = 37, n = 40, k = is_k_quant(dtype) ? 512 : 1088;
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = random_floats(static_cast<size_t>(m * k), ++seed, -2.0f, 2.0f);
    const auto w = random_blocks(dtype, n, k, ++seed);
    const PackedWeights packed = pack_weights(w.data(), dtype, n, k);
    ASSERT_TRUE(reads_repacked_blocks(packed));
    ThreadPool pool(2);
    std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size(), NAN);
    linear(x.data(), m, packed, nullptr, got.data(), pool);
    reference::linear(x.data(), m, k, w.data(), dtype, n, nullptr, want.data());
    EXPECT_TRUE(bitwise_equal(got.data(), want.data(), got.size()));
  }
}

// A row's result is the same alone (m = 1: VNNI), in a call under kAmxMinRows (VNNI) and at
// any place of a call that runs on tiles.
TEST(KernelsLinearAmx, IsBatchInvariantAcrossTheSwitchToTiles) {
  if (!cpu_has_amx()) GTEST_SKIP() << "this CPU (or its OS) offers no AMX-INT8 tiles";
  const int64_t m = 45, k = 512, n = 24;
  for (DType dtype : {DType::q8_0, DType::q4_k}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = random_floats(static_cast<size_t>(m * k), 11, -2.0f, 2.0f);
    const auto w = random_blocks(dtype, n, k, 12);
    const auto batch = run_linear(x, m, k, w.data(), dtype, n, nullptr, true, 2);
    for (int64_t r : {0, 15, 16, 44}) {
      const std::vector<float> row(x.begin() + r * k, x.begin() + (r + 1) * k);
      const auto alone = run_linear(row, 1, k, w.data(), dtype, n, nullptr, true, 1);
      EXPECT_TRUE(bitwise_equal(alone.data(), batch.data() + r * n, n)) << "row " << r;
    }
    const std::vector<float> few(x.begin(), x.begin() + (detail::avx512::kAmxMinRows - 1) * k);
    const auto under =
        run_linear(few, detail::avx512::kAmxMinRows - 1, k, w.data(), dtype, n, nullptr, true, 1);
    EXPECT_TRUE(bitwise_equal(under.data(), batch.data(), under.size()));
  }
}

// MoE experts with 0, a few and many tokens in one grouped call (tiles for the many, VNNI for
// the few), and a last pair of jobs on one x (as q / k / v share theirs), equal each job's own
// call without AMX.
TEST(KernelsLinearAmx, GroupedExpertsEqualTheirOwnCallsWithoutAmx) {
  if (!cpu_has_amx()) GTEST_SKIP() << "this CPU (or its OS) offers no AMX-INT8 tiles";
  const int64_t k = 256, n = 48;
  const std::vector<int64_t> rows{0, 3, 16, 50};
  for (DType dtype : {DType::q4_0, DType::q4_k}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<std::vector<float>> x, got;
    std::vector<std::vector<uint8_t>> w;
    std::vector<LinearJob> jobs;
    for (size_t e = 0; e < rows.size(); ++e) {
      x.push_back(random_floats(static_cast<size_t>(std::max<int64_t>(1, rows[e]) * k),
                                static_cast<uint32_t>(30 + e)));
      w.push_back(random_blocks(dtype, n, k, static_cast<uint32_t>(40 + e)));
      got.emplace_back(static_cast<size_t>(rows[e] * n), NAN);
      jobs.push_back({x.back().data(), rows[e], w.back().data(), got.back().data()});
    }
    w.push_back(random_blocks(dtype, n, k, 50));  // the last x again, other weights
    got.emplace_back(static_cast<size_t>(rows.back() * n), NAN);
    jobs.push_back({x.back().data(), rows.back(), w.back().data(), got.back().data()});
    {
      testing::IsaGuard isa(Isa::avx512);
      AmxGuard guard(true);
      ThreadPool pool(2);
      const int64_t calls = int8_tile_calls();
      linear_grouped(jobs, k, dtype, n, pool);
      EXPECT_GT(int8_tile_calls(), calls) << "the tiles did not run";
    }
    for (size_t e = 0; e < jobs.size(); ++e) {
      const std::vector<float>& xe = x[std::min(e, x.size() - 1)];
      const auto want = run_linear(xe, jobs[e].m, k, w[e].data(), dtype, n, nullptr, false, 1);
      EXPECT_TRUE(bitwise_equal(got[e].data(), want.data(), want.size())) << "job " << e;
    }
  }
}

// bf16 activations for the guard's lifetime, then the precision as it was.
class Bf16PrecisionGuard {
 public:
  Bf16PrecisionGuard() : was_(matmul_precision()) { set_matmul_precision(MatmulPrecision::bf16); }
  ~Bf16PrecisionGuard() { set_matmul_precision(was_); }
  Bf16PrecisionGuard(const Bf16PrecisionGuard&) = delete;
  Bf16PrecisionGuard& operator=(const Bf16PrecisionGuard&) = delete;

 private:
  MatmulPrecision was_;
};

std::vector<float> bf16_rounded(std::vector<float> x) {
  for (float& v : x) v = bf16_to_f32(f32_to_bf16(v));
  return x;
}

// Packed bf16 weights with bf16 activations on tiles: within the f32 summation bound of the
// reference on the rounded x (products of bf16 are exact; TDPBF16PS sums them in its own order),
// row, column and k tails included (k = 33, 100: a last step of zero-padded pairs), and two row
// blocks (m = 300). That the tiles ran shows in the bits: some differ from vdpbf16ps's.
TEST(KernelsLinearAmx, Bf16TilesMatchTheRoundedReference) {
  if (!cpu_has_amx()) GTEST_SKIP() << "this CPU (or its OS) offers no AMX-BF16 tiles";
  const testing::PackingOn packing;
  const Bf16PrecisionGuard bf16;
  testing::IsaGuard isa(Isa::avx512);
  AmxGuard guard(true);
  uint32_t seed = 4900;
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 64, 32}, {5, 33, 40}, {16, 896, 64}, {33, 100, 70}, {47, 256, 31}, {300, 128, 40}}) {
    SCOPED_TRACE(::testing::Message() << "m=" << m << " k=" << k << " n=" << n);
    const auto x = random_floats(static_cast<size_t>(m * k), ++seed);
    const auto wf = bf16_rounded(random_floats(static_cast<size_t>(n * k), ++seed));
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    const auto bias = random_floats(static_cast<size_t>(n), ++seed);
    const PackedWeights packed = pack_weights(w.data(), DType::bf16, n, k);
    ASSERT_TRUE(packed.defined());
    ThreadPool pool(2);
    std::vector<float> got(static_cast<size_t>(m * n), NAN), want(got.size(), NAN);
    linear(x.data(), m, packed, bias.data(), got.data(), pool);
    const auto xr = bf16_rounded(x);
    reference::linear(xr.data(), m, k, w.data(), DType::bf16, n, bias.data(), want.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double tol = testing::bf16_dot_tolerance(&xr[i * k], &wf[j * k], k, bias[j]);
        const size_t at = static_cast<size_t>(i * n + j);
        ASSERT_LE(std::fabs(got[at] - want[at]), tol) << "at row " << i << " col " << j;
      }
    }
    // Batch invariance: each row alone (and on one thread) gives the same bits.
    for (int64_t r : {int64_t{0}, m / 2, m - 1}) {
      ThreadPool one(1);
      std::vector<float> alone(static_cast<size_t>(n), NAN);
      linear(x.data() + r * k, 1, packed, bias.data(), alone.data(), one);
      EXPECT_TRUE(bitwise_equal(alone.data(), got.data() + r * n, n)) << "row " << r;
    }
    if (k >= 256) {  // long enough dots that the two units' sums differ somewhere
      AmxGuard vector_units(false);
      std::vector<float> dpbf16(got.size(), NAN);
      linear(x.data(), m, packed, bias.data(), dpbf16.data(), pool);
      EXPECT_FALSE(bitwise_equal(dpbf16.data(), got.data(), got.size()))
          << "the bf16 tiles gave vdpbf16ps's bits: did they run?";
    }
  }
}

// Without AMX (the CPU, or DEEPINFER_ISA other than amx / auto) the VNNI / AVX-512 kernels run
// and the start-up path says so; asking for AMX there is an error that names it.
TEST(KernelsLinearAmx, FallbackIsChosenAndNamedWithoutAmx) {
  EXPECT_FALSE(resolve_amx_request("avx512"));
  EXPECT_FALSE(resolve_amx_request("scalar"));
  EXPECT_EQ(resolve_amx_request("auto"), cpu_has_amx());
  if (!isa_supported(Isa::avx512)) return;
  testing::IsaGuard isa(Isa::avx512);
  if (!cpu_has_amx()) {
    std::printf("[ note ] no AMX on this CPU: checking the fallback only\n");
    EXPECT_FALSE(amx_active());
    EXPECT_EQ(std::string(block_linear_path()).find("AMX"), std::string::npos);
    EXPECT_THROW(set_amx(true), Error);
    try {
      resolve_amx_request("amx");
      ADD_FAILURE() << "DEEPINFER_ISA=amx accepted without AMX";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'amx' is not supported"), std::string::npos)
          << e.what();
    }
    return;
  }
  EXPECT_TRUE(resolve_amx_request("amx"));
  EXPECT_EQ(resolve_isa_request("amx"), Isa::avx512);
  {
    AmxGuard guard(false);
    EXPECT_FALSE(amx_active());
    EXPECT_EQ(std::string(block_linear_path()), "AVX-512 VNNI");
  }
  {
    AmxGuard guard(true);
    EXPECT_TRUE(amx_active());
    EXPECT_NE(std::string(block_linear_path()).find("AMX-INT8"), std::string::npos);
    testing::IsaGuard avx2(Isa::avx2);
    EXPECT_FALSE(amx_active());
  }
}

}  // namespace
}  // namespace deepinfer::kernels
