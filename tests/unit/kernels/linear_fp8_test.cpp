// kernels::linear_fp8 (FP8 E4M3 with block scales, widened in register): every ISA bitwise
// equal to the scalar reference (linear_fp8.h states the arithmetic) on random shapes with
// tails (k not a multiple of 16, odd n, m = 1..9, partial edge blocks); the reference within
// a float bound of the exact f64 product with the weights as core/dtype.h widens them and as
// io/fp8.h dequantizes them; batch and thread-count invariance; hand-checked E4M3 values;
// block columns that are not whole vectors refused with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace deepinfer::kernels {
namespace {

using testing::IsaGuard;
using testing::random_floats;

struct Fp8Matrix {
  int64_t n = 0, k = 0, br = 0, bc = 0;
  std::vector<uint8_t> q;
  std::vector<float> scale;
  Fp8Weight weight() const { return {q.data(), scale.data(), br, bc}; }
  // W[j, c] as io/fp8.h's dequantize_fp8_blocks computes it (fp8 * scale, one rounding).
  float value(int64_t j, int64_t c) const {
    return f8_e4m3_to_f32(q[static_cast<size_t>(j * k + c)]) *
           scale[static_cast<size_t>((j / br) * ((k + bc - 1) / bc) + c / bc)];
  }
};

// Random bytes except NaN (S.1111.111), scales of either sign around 1e-2.
Fp8Matrix random_fp8(int64_t n, int64_t k, int64_t br, int64_t bc, uint32_t seed) {
  std::mt19937 rng(seed);
  Fp8Matrix m{n, k, br, bc, {}, {}};
  m.q.resize(static_cast<size_t>(n * k));
  for (auto& b : m.q) {
    do {
      b = static_cast<uint8_t>(rng());
    } while ((b & 0x7f) == 0x7f);
  }
  m.scale = random_floats(static_cast<size_t>(((n + br - 1) / br) * ((k + bc - 1) / bc)), seed + 1,
                          -0.02f, 0.02f);
  return m;
}

std::vector<float> run(const Fp8Matrix& w, const std::vector<float>& x, int64_t m,
                       const float* bias, ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(m * w.n));
  linear_fp8(x.data(), m, w.k, w.weight(), w.n, bias, y.data(), pool);
  return y;
}

TEST(Fp8Values, WidenAsTheOcpE4m3Table) {
  EXPECT_EQ(f8_e4m3_to_f32(0x7e), 448.0f);                // largest finite
  EXPECT_EQ(f8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(f8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f8_e4m3_to_f32(0xc4), -3.0f);  // 1.1000.100: -(1 + 4/8) * 2
  EXPECT_TRUE(std::signbit(f8_e4m3_to_f32(0x80)));
  // Through the kernel: an identity x picks single weights, scale 1.
  ThreadPool pool(1);
  for (Isa isa : supported_isas()) {
    IsaGuard guard(isa);
    Fp8Matrix w{1, 16, 16, 16, {}, {1.0f}};
    w.q = {0x7e, 0x01, 0x38, 0xc4, 0x80, 0x00, 0x08, 0x77,
           0xfe, 0x3f, 0x40, 0x07, 0x30, 0x28, 0x5a, 0x11};
    for (int c = 0; c < 16; ++c) {
      std::vector<float> x(16, 0.0f);
      x[static_cast<size_t>(c)] = 1.0f;
      const std::vector<float> y = run(w, x, 1, nullptr, pool);
      EXPECT_EQ(y[0], f8_e4m3_to_f32(w.q[static_cast<size_t>(c)]) + 0.0f)
          << isa_name(isa) << " byte " << int(w.q[static_cast<size_t>(c)]);
    }
  }
}

TEST(LinearFp8, EveryIsaEqualsTheScalarReferenceOnRandomShapesWithTails) {
  const struct {
    int64_t n, k, br, bc;
  } shapes[] = {{7, 13, 4, 16},      {33, 64, 32, 32}, {17, 100, 8, 48},
                {64, 160, 128, 128}, {9, 257, 5, 32},  {1, 16, 1, 16}};
  ThreadPool pool(2);
  uint32_t seed = 11;
  for (const auto& s : shapes) {
    const Fp8Matrix w = random_fp8(s.n, s.k, s.br, s.bc, ++seed);
    const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), ++seed);
    for (int64_t m = 1; m <= 9; m += 4) {
      const std::vector<float> x = random_floats(static_cast<size_t>(m * s.k), ++seed);
      std::vector<float> want;
      {
        IsaGuard guard(Isa::scalar);
        want = run(w, x, m, bias.data(), pool);
      }
      // The reference against the exact product of the same weights: f32 sums of k products.
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double exact = bias[static_cast<size_t>(j)], magnitude = std::fabs(exact);
          for (int64_t c = 0; c < s.k; ++c) {
            const double p =
                static_cast<double>(x[static_cast<size_t>(i * s.k + c)]) * w.value(j, c);
            exact += p;
            magnitude += std::fabs(p);
          }
          // f32 accumulation: at most about (k / 16 + 4) roundings on any product's path.
          const double bound = 6e-8 * static_cast<double>(s.k / 16 + 8) * magnitude + 1e-30;
          EXPECT_NEAR(want[static_cast<size_t>(i * s.n + j)], exact, bound)
              << "n=" << s.n << " k=" << s.k << " (" << i << ", " << j << ")";
        }
      }
      for (Isa isa : supported_isas()) {
        IsaGuard guard(isa);
        EXPECT_EQ(run(w, x, m, bias.data(), pool), want)
            << isa_name(isa) << " n=" << s.n << " k=" << s.k << " m=" << m;
      }
    }
  }
}

TEST(LinearFp8, BatchAndThreadCountInvariant) {
  const Fp8Matrix w = random_fp8(37, 200, 16, 32, 5);
  const std::vector<float> x = random_floats(static_cast<size_t>(70 * 200), 6);
  ThreadPool one(1), two(2);
  for (Isa isa : supported_isas()) {
    IsaGuard guard(isa);
    const std::vector<float> batch = run(w, x, 70, nullptr, two);
    EXPECT_EQ(run(w, x, 70, nullptr, one), batch) << isa_name(isa);
    for (int64_t r : {0, 3, 64, 69}) {
      const std::vector<float> row(x.begin() + r * 200, x.begin() + (r + 1) * 200);
      const std::vector<float> alone = run(w, row, 1, nullptr, two);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + r * 37))
          << isa_name(isa) << " row " << r;
    }
  }
}

TEST(LinearFp8, BlockColumnsThatAreNotWholeVectorsAreRefused) {
  const Fp8Matrix w = random_fp8(4, 32, 8, 8, 1);
  std::vector<float> x(32, 1.0f), y(4);
  ThreadPool pool(1);
  try {
    linear_fp8(x.data(), 1, 32, w.weight(), 4, nullptr, y.data(), pool);
    ADD_FAILURE() << "8-column blocks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8x8 are not supported"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::kernels
