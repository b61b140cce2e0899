// Portable block-weight linear (q8_0 / q4_0 / q5_0 / q4_k / q5_k / q4_1 weights, x quantized by
// quantize_x_blocks): the fallback when the CPU has no AVX2, and the plainest statement of the
// arithmetic in kernels.h that the SIMD paths reproduce bit for bit.
#include <cmath>
#include <cstring>

#include "core/quant_blocks.h"
#include "kernels/backend.h"

namespace deepinfer::kernels::detail::scalar {
namespace {

// Bytes per stored block (ggml's block_q8_0 / q4_0 / q5_0 / q4_1, or a q4_K / q5_K
// super-block), from the type-traits table.
int64_t block_bytes(DType dtype) {
  return static_cast<int64_t>(block_traits(dtype)->block_bytes);
}

float f16_at(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// The 32 quants of a block in element order as the dot products take them: q8_0's int8, q4_0's
// and q5_0's unsigned quants (their -8 / -16 enters through the x block term), q4_1's nibbles.
void block_quants(const uint8_t* block, DType dtype, int32_t* out) {
  if (dtype == DType::q8_0) {
    for (int e = 0; e < 32; ++e) out[e] = static_cast<int8_t>(block[2 + e]);
    return;
  }
  const uint8_t* qs = block + (dtype == DType::q4_0 ? 2 : dtype == DType::q5_0 ? 6 : 4);
  uint32_t qh = 0;  // q5_0's fifth bits, bit e for element e
  if (dtype == DType::q5_0) std::memcpy(&qh, block + 2, sizeof(qh));
  for (int e = 0; e < 16; ++e) {
    out[e] = static_cast<int32_t>((qs[e] & 0x0fu) | (((qh >> e) & 1u) << 4));
    out[e + 16] = static_cast<int32_t>((qs[e] >> 4) | (((qh >> (e + 16)) & 1u) << 4));
  }
}

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

// Block b (32 elements) of a whole-block type's row: its quants as the dot products take them
// (block_quants), the weight scale d_w and for q4_k / q5_k the min term m_w (kernels.h).
struct WholeBlock {
  int32_t q[32];
  float d = 0.0f;
  float m = 0.0f;
};

WholeBlock whole_block(const uint8_t* row, DType dtype, int64_t b) {
  WholeBlock w;
  if (dtype != DType::q4_k && dtype != DType::q5_k) {
    const uint8_t* block = row + b * block_bytes(dtype);
    block_quants(block, dtype, w.q);
    w.d = f16_at(block);
    return w;
  }
  // Super-block: d, dmin, 12 scale bytes, [q5_k: 32 bytes of fifth bits], 128 nibble bytes;
  // sub-block j is the low (even j) or high (odd j) nibbles of bytes 32 (j / 2) ...
  const bool five = dtype == DType::q5_k;
  const uint8_t* super = row + (b / 8) * block_bytes(dtype);
  const int j = static_cast<int>(b % 8);
  int scale, min;
  k4_scale_min(super + 4, j, &scale, &min);
  w.d = f16_at(super) * static_cast<float>(scale);
  w.m = -(f16_at(super + 2) * static_cast<float>(min));
  const uint8_t* qs = super + (five ? 48 : 16) + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  for (int e = 0; e < 32; ++e) {
    w.q[e] = (qs[e] >> shift) & 0x0f;
    if (five) w.q[e] |= ((super[16 + e] >> j) & 1) << 4;
  }
  return w;
}

// q4_0 / q5_0 / q8_0 / q4_k / q5_k: per block the whole 32-element integer dot (from the x
// block term quantize_x_blocks stores), then one scale and FMA per block (and one for the min
// term), in block order.
void whole_block_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const size_t row_bytes = dtype_bytes(a.w_dtype, a.k);
  const bool with_min = a.w_dtype == DType::q4_k || a.w_dtype == DType::q5_k;
  for (int64_t j = n0; j < n1; ++j) {
    const auto* row = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(j) * row_bytes;
    for (int64_t i = m0; i < m1; ++i) {
      const int8_t* xq = a.xq + i * a.k;
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const WholeBlock w = whole_block(row, a.w_dtype, b);
        const int64_t at = (i * blocks + b) * 8;
        // The x block term is -offset * s for q4_0 / q5_0 (0 for the k-quants' plain quants);
        // q8_0's quants are taken signed here, so its term (-128 s, for w + 128) is not; for
        // q4_k / q5_k it is the f32 d_x * float(s) of the min term.
        int32_t t = with_min || a.w_dtype == DType::q8_0 ? 0 : a.xt[at];
        for (int e = 0; e < 32; ++e) t += w.q[e] * xq[b * kQuantBlock + e];
        acc = std::fma(w.d * a.xd[at], static_cast<float>(t), acc);
        if (with_min) {
          float ds;
          std::memcpy(&ds, &a.xt[at], sizeof(ds));
          acc = std::fma(w.m, ds, acc);
        }
      }
      a.y[i * a.n + j] = a.bias ? acc + a.bias[j] : acc;
    }
  }
}

}  // namespace

void linear_rows_q8(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (is_whole_block_dtype(a.w_dtype)) return whole_block_rows(a, m0, m1, n0, n1);
  // q4_1: per-lane scales and mins (kernels.h).
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t bb = block_bytes(a.w_dtype);
  for (int64_t j = n0; j < n1; ++j) {
    const auto* row = static_cast<const uint8_t*>(a.w) + j * blocks * bb;
    for (int64_t i = m0; i < m1; ++i) {
      const int8_t* xq = a.xq + i * a.k;
      const float* xd = a.xd + i * blocks * 8;
      const int32_t* xt = a.xt + i * blocks * 8;
      float acc[16] = {};
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* block = row + b * bb;
        int32_t w[32];
        block_quants(block, a.w_dtype, w);
        const float d = f16_at(block) * xd[b * 8];
        const float mw = f16_at(block + 2);
        for (int l = 0; l < 8; ++l) {
          int32_t t = 0;
          for (int e = 4 * l; e < 4 * l + 4; ++e) t += w[e] * xq[b * kQuantBlock + e];
          float& lane = acc[8 * (b % 2) + l];
          lane = std::fma(d, static_cast<float>(t), lane);
          float ds;  // d_x * float(s[l]), as quantize_x_blocks computed it
          std::memcpy(&ds, &xt[b * 8 + l], sizeof(ds));
          lane = std::fma(mw, ds, lane);
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
