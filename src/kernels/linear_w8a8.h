#pragma once
// Internal to src/kernels: the per-ISA W8A8 linear (kernels.h, linear_w8a8). Each x row is
// quantized once per call (linear_w8a8.cpp, baseline code shared by every ISA) to int8 with one
// scale per token; each ISA then computes the exact int32 dot product
//   t = sum_c w[j, c] * xq[i, c]
// (|t| <= 127 * 128 * k: exact for k < 2^17) and the one epilogue
//   s = w_scale[j] * x_scale[i];  y = fma(float(t), s, bias[j])  (y = float(t) * s without bias)
// so every ISA is bitwise equal to the scalar reference and batch invariant (integer sums do not
// depend on their order). AVX2 and AVX-512BW widen both operands to int16 (vpmaddwd: exact for
// every int8, -128 included); AVX-512 VNNI's vpdpbusd multiplies u8 by s8, so it takes x + 128
// (u8) times w (s8) and subtracts 128 * sum_c w[j, c], that row's weight sum, accumulated by a
// second vpdpbusd against ones in the same pass (llama.cpp's and oneDNN's offset trick).
#include <cstdint>

namespace deepinfer::kernels::detail {

struct W8a8Args {
  const int8_t* xq = nullptr;      // [m, x_stride] int8, zero past k
  const uint8_t* xu = nullptr;     // [m, x_stride] xq + 128 (VNNI), 128 past k
  const float* x_scale = nullptr;  // [m]
  int64_t x_stride = 0;            // k rounded up to 64
  int64_t k = 0;
  const int8_t* w = nullptr;       // [n, k]
  const float* w_scale = nullptr;  // [n]
  int64_t n = 0;
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;           // [m, n]
};

inline constexpr int64_t kW8a8Pad = 64;

// Outputs y[r0 .. r1, j0 .. j1).
namespace scalar {
void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1);
}
namespace avx2 {
void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1);
}
namespace avx512 {
void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1);
}
namespace avx512vnni {
void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1);
}

}  // namespace deepinfer::kernels::detail
