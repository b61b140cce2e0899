// kernels::linear_w8a8 (int8 weights with a scale per output row, per-token int8 activations,
// exact int32 sums): the scalar reference equal (max rel diff <= 1e-6; in fact bitwise) to the
// test's own integer computation from its own quantization of x; every ISA path (AVX2,
// AVX-512BW and AVX-512 VNNI's +128 offset form) bitwise equal to the reference on random shapes
// with tails (k not a multiple of 64 or 32, odd n, m = 1..9) and int8 weights that include
// -128; batch and thread-count invariance; the per-token quantizer on hand-checked values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/linear_w8a8.h"

namespace deepinfer::kernels {
namespace {

using testing::IsaGuard;
using testing::random_floats;

std::vector<int8_t> random_int8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> out(n);
  for (auto& v : out) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  return out;
}

std::vector<float> run(const std::vector<float>& x, int64_t m, int64_t k,
                       const std::vector<int8_t>& w, const std::vector<float>& ws, int64_t n,
                       const float* bias, ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(m * n));
  linear_w8a8(x.data(), m, k, w.data(), ws.data(), n, bias, y.data(), pool);
  return y;
}

TEST(W8a8Quantize, PerTokenSymmetricRoundsHalfToEven) {
  const std::vector<float> x = {1.0f, -0.5f, 0.25f, 0.0f, -1.0f, 0.5f / 127.0f * 3.0f};
  std::vector<int8_t> q(x.size());
  float scale = 0;
  quantize_w8a8_row(x.data(), static_cast<int64_t>(x.size()), q.data(), &scale);
  EXPECT_EQ(scale, 1.0f / 127.0f);
  // 127 * -0.5 = -63.5 -> -64 (even); 127 * 0.25 = 31.75 -> 32; 1.5 -> 2 (even).
  EXPECT_EQ(q, (std::vector<int8_t>{127, -64, 32, 0, -127, 2}));
  const std::vector<float> zeros(5, 0.0f);
  quantize_w8a8_row(zeros.data(), 5, q.data(), &scale);
  EXPECT_EQ(scale, 0.0f);
  EXPECT_EQ(std::count(q.begin(), q.begin() + 5, 0), 5);
}

struct Shape3 {
  int64_t m, k, n;
};

TEST(LinearW8a8, ReferenceIsTheExactIntegerProductAndEveryIsaEqualsIt) {
  const Shape3 shapes[] = {{1, 1, 3},   {2, 13, 7},   {3, 63, 9},   {5, 64, 16},
                           {9, 65, 17}, {4, 200, 33}, {1, 1000, 5}, {7, 96, 11}};
  ThreadPool pool(2);
  uint32_t seed = 3;
  for (const Shape3& s : shapes) {
    const auto x = random_floats(static_cast<size_t>(s.m * s.k), ++seed);
    const auto w = random_int8(static_cast<size_t>(s.n * s.k), ++seed);
    const auto ws = random_floats(static_cast<size_t>(s.n), ++seed, 1e-4f, 1e-2f);
    const auto bias = random_floats(static_cast<size_t>(s.n), ++seed);
    std::vector<float> want;
    {
      IsaGuard guard(Isa::scalar);
      want = run(x, s.m, s.k, w, ws, s.n, bias.data(), pool);
    }
    // The test's own per-token quantization and int64 dot products.
    for (int64_t i = 0; i < s.m; ++i) {
      float amax = 0;
      for (int64_t c = 0; c < s.k; ++c) amax = std::max(amax, std::fabs(x[i * s.k + c]));
      const float xs = amax / 127.0f;
      for (int64_t j = 0; j < s.n; ++j) {
        int64_t t = 0;
        for (int64_t c = 0; c < s.k; ++c) {
          const auto q = static_cast<int64_t>(std::nearbyint(x[i * s.k + c] * (127.0f / amax)));
          t += q * w[static_cast<size_t>(j * s.k + c)];
        }
        const float expect = std::fma(static_cast<float>(t), ws[j] * xs, bias[j]);
        const float got = want[static_cast<size_t>(i * s.n + j)];
        EXPECT_LE(std::fabs(got - expect), 1e-6 * std::fabs(expect) + 1e-7)
            << "m=" << s.m << " k=" << s.k << " (" << i << ", " << j << ")";
      }
    }
    for (Isa isa : supported_isas()) {
      IsaGuard guard(isa);
      EXPECT_EQ(run(x, s.m, s.k, w, ws, s.n, bias.data(), pool), want)
          << isa_name(isa) << " m=" << s.m << " k=" << s.k << " n=" << s.n;
    }
  }
}

// AVX-512 has two paths (BW: int16 widening; VNNI: the +128 offset with the weight-sum
// correction); the dispatcher picks one, so both are called here directly.
TEST(LinearW8a8, BothAvx512VariantsEqualTheReference) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const int64_t m = 6, k = 131, n = 13, stride = 192;
  const auto w = random_int8(static_cast<size_t>(n * k), 1);
  const auto xq = random_int8(static_cast<size_t>(m * stride), 2);
  std::vector<int8_t> x_padded(xq);
  std::vector<uint8_t> xu(static_cast<size_t>(m * stride));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < stride; ++c) {
      int8_t& q = x_padded[static_cast<size_t>(i * stride + c)];
      if (q == -128 || c >= k) q = c >= k ? 0 : -127;  // what the quantizer can produce
      xu[static_cast<size_t>(i * stride + c)] = static_cast<uint8_t>(q + 128);
    }
  }
  const auto ws = random_floats(static_cast<size_t>(n), 3, 1e-3f, 1e-2f);
  const auto xs = random_floats(static_cast<size_t>(m), 4, 1e-3f, 1e-2f);
  const auto run_variant = [&](auto fn) {
    std::vector<float> y(static_cast<size_t>(m * n));
    const detail::W8a8Args args{x_padded.data(), xu.data(), xs.data(), stride,  k,
                                w.data(),        ws.data(), n,         nullptr, y.data()};
    fn(args, 0, m, 0, n);
    return y;
  };
  const auto want = run_variant(&detail::scalar::linear_w8a8_rows);
  EXPECT_EQ(run_variant(&detail::avx512::linear_w8a8_rows), want);
  if (cpu_has_avx512_vnni()) {
    EXPECT_EQ(run_variant(&detail::avx512vnni::linear_w8a8_rows), want);
  }
}

TEST(LinearW8a8, BatchAndThreadCountInvariant) {
  const int64_t m = 70, k = 150, n = 29;
  const auto x = random_floats(static_cast<size_t>(m * k), 7);
  const auto w = random_int8(static_cast<size_t>(n * k), 8);
  const auto ws = random_floats(static_cast<size_t>(n), 9, 1e-3f, 1e-2f);
  ThreadPool one(1), two(2);
  for (Isa isa : supported_isas()) {
    IsaGuard guard(isa);
    const auto batch = run(x, m, k, w, ws, n, nullptr, two);
    EXPECT_EQ(run(x, m, k, w, ws, n, nullptr, one), batch) << isa_name(isa);
    for (int64_t r : {0, 5, 64, 69}) {
      const std::vector<float> row(x.begin() + r * k, x.begin() + (r + 1) * k);
      const auto alone = run(row, 1, k, w, ws, n, nullptr, two);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + r * n))
          << isa_name(isa) << " row " << r;
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
