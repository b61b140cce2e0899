// The AVX2 / AVX-512 activation quantizers (backend.h, quantize_x_blocks) store the bytes of the
// baseline one: quants, scales and every weight type's terms, on random rows and on the blocks
// where rounding and special values decide (ties, clamping, zeros, NaN, infinities, -0).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/isa.h"
#include "kernels/quantize_x_terms.h"

namespace deepinfer::kernels {
namespace {

using testing::random_floats;
using QuantizeFn = void (*)(const float*, int64_t, int64_t, DType, int8_t*, float*, int32_t*);

struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> t;
};

Quantized run(QuantizeFn fn, const std::vector<float>& x, int64_t m, int64_t k, DType dtype) {
  Quantized out{std::vector<int8_t>(x.size()), std::vector<float>(x.size() / 4),
                std::vector<int32_t>(x.size() / 4)};
  fn(x.data(), m, k, dtype, out.q.data(), out.d.data(), out.t.data());
  return out;
}

std::vector<std::pair<const char*, QuantizeFn>> simd_quantizers() {
  std::vector<std::pair<const char*, QuantizeFn>> fns;
  if (isa_supported(Isa::avx2))
    fns.emplace_back("avx2", [](const float* x, int64_t m, int64_t k, DType dtype, int8_t* q,
                                float* d, int32_t* t) {
      detail::avx2::quantize_x_blocks(x, m, k, detail::qx::terms_of(dtype), q, d, t);
    });
  if (isa_supported(Isa::avx512))
    fns.emplace_back("avx512", [](const float* x, int64_t m, int64_t k, DType dtype, int8_t* q,
                                  float* d, int32_t* t) {
      detail::avx512::quantize_x_blocks(x, m, k, detail::qx::terms_of(dtype), q, d, t);
    });
  return fns;
}

// Blocks 0 .. 5 of a row: rounding ties and clamping with a scale of exactly 1 (max |x| 127),
// all zeros, a NaN, +inf, -inf among finite values, -0 and subnormals.
void put_special_blocks(float* row) {
  const float inf = std::numeric_limits<float>::infinity();
  const float ties[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, -126.5f, 126.5f};
  for (int e = 0; e < 32; ++e) row[e] = ties[e % 8];
  for (int e = 0; e < 32; ++e) row[32 + e] = 0.0f;
  row[64 + 7] = std::nanf("");
  row[96 + 3] = inf;
  row[128 + 30] = -inf;
  for (int e = 0; e < 32; ++e)
    row[160 + e] = e % 2 ? -0.0f : std::numeric_limits<float>::denorm_min();
}

TEST(QuantizeX, SimdQuantizersStoreTheBaselineBytes) {
  const auto fns = simd_quantizers();
  if (fns.empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t m = 3, k = 32 * 37;
  auto x = random_floats(static_cast<size_t>(m * k), 91, -3.0f, 3.0f);
  put_special_blocks(x.data() + k);
  for (DType dtype : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q4_k,
                      DType::q5_k, DType::q6_k}) {
    const Quantized want = run(&detail::quantize_x_blocks, x, m, k, dtype);
    for (const auto& [name, fn] : fns) {
      SCOPED_TRACE(::testing::Message() << name << " " << dtype_name(dtype));
      const Quantized got = run(fn, x, m, k, dtype);
      EXPECT_EQ(got.q, want.q);
      EXPECT_EQ(std::memcmp(got.d.data(), want.d.data(), got.d.size() * sizeof(float)), 0);
      EXPECT_EQ(got.t, want.t);
    }
  }
}

// Hand-checked: with max |x| = 127 the scale is 1 and the quants are x rounded to nearest even.
TEST(QuantizeX, TiesRoundToEvenOnEveryIsa) {
  std::vector<float> x(32 * 6);
  put_special_blocks(x.data());
  auto fns = simd_quantizers();
  fns.emplace_back("baseline", &detail::quantize_x_blocks);
  for (const auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    const Quantized got = run(fn, x, 1, static_cast<int64_t>(x.size()), DType::q4_0);
    const int8_t want[] = {127, 2, -4, 0, 0, 2, -126, 126};
    for (int e = 0; e < 32; ++e) EXPECT_EQ(got.q[e], want[e % 8]) << e;
    EXPECT_EQ(got.d[0], 1.0f);
    // q4_0's term: -8 times the block's sum (4 x (127 + 2 - 4 + 0 + 0 + 2 - 126 + 126)).
    EXPECT_EQ(got.t[0], -8 * 4 * 127);
    EXPECT_EQ(got.d[8], 0.0f);           // all zeros: scale 0, quants 0
    EXPECT_TRUE(std::isnan(got.d[16]));  // a NaN: the scale carries it
    EXPECT_TRUE(std::isinf(got.d[24]));  // +inf: quants 0, infinite scale
    for (int e = 0; e < 32; ++e) EXPECT_EQ(got.q[96 + e], 0) << e;
    EXPECT_TRUE(std::isinf(got.d[32]));
    EXPECT_EQ(got.q[128 + 30], 0);
  }
}

}  // namespace
}  // namespace deepinfer::kernels
