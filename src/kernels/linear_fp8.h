#pragma once
// Internal to src/kernels: the per-ISA FP8 E4M3 block-scaled linear (kernels.h, linear_fp8).
// Each ISA computes, for output (i, j), exactly
//   w(c) = f32(q[j, c]) * scale[j / block_rows, c / block_cols]     (one f32 rounding)
//   A[c % 16] = fma(x[i, c], w(c), A[c % 16])   for c = 0 .. roundup(k, 16) - 1, in order,
//                                               with x = w = 0 past k
//   h[l] = A[l] + A[l + 8];  y = ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)) (+ bias[j])
// so scalar, AVX2 and AVX-512 are bitwise equal, and a row's result depends on nothing but
// that row (batch invariant). f32(q) is exact: the fp8 value's bits moved into an f32
// (sign, then exponent and mantissa shifted by 20, times 2^120 to rebias 7 -> 127, which also
// makes fp8 subnormals exact), NaN for S.1111.111 — what core/dtype.h f8_e4m3_to_f32 gives.
// The weights are the values DeepSeek's weight_dequant and io/fp8.h's dequantize_fp8_blocks
// compute, so this differs from the dequantize-at-load f32 path only in summation order.
// block_cols is a multiple of 16 (one scale per vector).
#include <cstdint>

namespace deepinfer::kernels::detail {

struct Fp8LinearArgs {
  const float* x = nullptr;  // [m, k]
  int64_t k = 0;
  const uint8_t* w = nullptr;    // [n, k] E4M3
  const float* scale = nullptr;  // [ceil(n / block_rows), scale_cols]
  int64_t scale_cols = 0;        // ceil(k / block_cols)
  int64_t block_rows = 0;
  int64_t block_cols = 0;
  int64_t n = 0;
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;           // [m, n]
};

inline constexpr int64_t kFp8Lanes = 16;

// Outputs y[r0 .. r1, j0 .. j1).
namespace scalar {
void linear_fp8_rows(const Fp8LinearArgs& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1);
}
namespace avx2 {
void linear_fp8_rows(const Fp8LinearArgs& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1);
}
namespace avx512 {
void linear_fp8_rows(const Fp8LinearArgs& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1);
}

}  // namespace deepinfer::kernels::detail
