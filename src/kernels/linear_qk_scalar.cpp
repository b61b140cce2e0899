// Portable block-weight linear for q5_1 and the k-quants q4_k / q5_k / q6_k: the
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
// q6_k is q - 32), the scale of each 4-element lane and, for the types with a
// min, the lane's min term (-dmin * min for the k-quants). Every scale is an f16 times a small
// integer, exact in f32.
struct Block {
  int32_t q[32];
  float d[8];
  float m[8];
};

// Scale and min (6 bits each) of sub-block j of a q4_k / q5_k super-block (12 packed bytes).
void k4_scale_min(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

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
    case DType::q4_k:
    case DType::q5_k: {
      const bool five = dtype == DType::q5_k;
      const uint8_t* super = row + (b / 8) * (five ? 176 : 144);
      const int j = static_cast<int>(b % 8);
      int scale, min;
      k4_scale_min(super + 4, j, &scale, &min);
      fill(out.d, f16_at(super) * static_cast<float>(scale));
      fill(out.m, -(f16_at(super + 2) * static_cast<float>(min)));
      const uint8_t* qs = super + (five ? 48 : 16) + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int e = 0; e < 32; ++e) {
        out.q[e] = (qs[e] >> shift) & 0x0f;
        if (five) out.q[e] |= ((super[16 + e] >> j) & 1) << 4;
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
  const bool with_min =
      a.w_dtype == DType::q5_1 || a.w_dtype == DType::q4_k || a.w_dtype == DType::q5_k;
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
