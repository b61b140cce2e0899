// Portable block-weight linear for q5_1 and q6_k (per-lane scales, kernels.h): the
// fallback when the CPU has no AVX2, and the plainest statement of the per-lane arithmetic of
// kernels.h that the SIMD paths (linear_qk_avx2.cpp, linear_qk_avx512.h) reproduce bit for bit.
#include <cmath>
#include <cstring>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::scalar {
namespace {

float f16_at(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// One 32-element weight block as the dot products see it: its integers (offset taken out, so
// q6_k is q - 32), the scale of each 4-element lane and, for q5_1, the lane's min term. Every scale
// is an f16 times a small integer, exact in f32.
struct Block {
  int32_t q[32];
  float d[8];
  float m[8];
};

void fill(float* lanes, float v) {
  for (int l = 0; l < 8; ++l) lanes[l] = v;
}

// Block b (32 elements) of a weight row.
void decode(const uint8_t* row, DType dtype, int64_t b, Block& out) {
  fill(out.m, 0.0f);
  switch (dtype) {
    case DType::q5_1: {
      const uint8_t* block = row + b * 24;
      fill(out.d, f16_at(block));
      fill(out.m, f16_at(block + 2));
      const uint32_t qh = u32_at(block + 4);
      const uint8_t* qs = block + 8;
      for (int e = 0; e < 16; ++e) {
        out.q[e] = static_cast<int32_t>((qs[e] & 0x0fu) | (((qh >> e) & 1u) << 4));
        out.q[e + 16] = static_cast<int32_t>((qs[e] >> 4) | (((qh >> (e + 16)) & 1u) << 4));
      }
      return;
    }
    case DType::q6_k: {
      const uint8_t* super = row + (b / 8) * 210;
      const int j = static_cast<int>(b % 8), half = j / 4, quarter = j % 4;
      const uint8_t* ql = super + 64 * half + 32 * (quarter % 2);
      const uint8_t* qh = super + 128 + 32 * half;
      const int shift = 4 * (quarter / 2);
      const auto* scales = reinterpret_cast<const int8_t*>(super + 192 + 8 * half + 2 * quarter);
      const float d = f16_at(super + 208);
      for (int l = 0; l < 8; ++l) out.d[l] = d * static_cast<float>(scales[l / 4]);
      for (int e = 0; e < 32; ++e)
        out.q[e] = (((ql[e] >> shift) & 0x0f) | (((qh[e] >> (2 * quarter)) & 3) << 4)) - 32;
      return;
    }
    default:
      return;
  }
}

}  // namespace

void linear_rows_qk(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const size_t row_bytes = dtype_bytes(a.w_dtype, a.k);
  const bool with_min = a.w_dtype == DType::q5_1;
  Block w;
  for (int64_t j = n0; j < n1; ++j) {
    const auto* row = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(j) * row_bytes;
    for (int64_t i = m0; i < m1; ++i) {
      const int8_t* xq = a.xq + i * a.k;
      const float* xd = a.xd + i * blocks * 8;
      const int32_t* xt = a.xt + i * blocks * 8;
      float acc[16] = {};
      for (int64_t b = 0; b < blocks; ++b) {
        decode(row, a.w_dtype, b, w);
        for (int l = 0; l < 8; ++l) {
          int32_t t = 0;
          for (int e = 4 * l; e < 4 * l + 4; ++e) t += w.q[e] * xq[b * kQuantBlock + e];
          float& lane = acc[8 * (b % 2) + l];
          lane = std::fma(w.d[l] * xd[b * 8 + l], static_cast<float>(t), lane);
          if (with_min) {
            float ds;  // d_x * float(s[l]), as quantize_x_blocks computed it
            std::memcpy(&ds, &xt[b * 8 + l], sizeof(ds));
            lane = std::fma(w.m[l], ds, lane);
          }
        }
      }
      float h[8];
      for (int l = 0; l < 8; ++l) h[l] = acc[l] + acc[l + 8];
      const float sum = ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
      a.y[i * a.n + j] = a.bias ? sum + a.bias[j] : sum;
    }
  }
}

}  // namespace deepinfer::kernels::detail::scalar
