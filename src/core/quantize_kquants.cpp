#include "core/quantize_kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"

// Bit-exactness with llama-quantize is the point of this file, so every float operation is the
// one ggml's reference quantizer performs, in its order and in f32: sums accumulate element by
// element from index 0, products associate left to right as the C expressions do (w * l * x is
// (w * l) * x), integers become floats where C converts them, and the file is built with
// -ffp-contract=off (CMakeLists.txt) so that no a * b + c is fused into an FMA. Rounding to
// the nearest integer is round-half-to-even, as ggml's nearest_int, for every value these
// formulas produce (|v| < 2^22).

namespace deepinfer::kquants {
namespace {

constexpr int kGroup = 32;  // Q4_K / Q5_K: 8 groups of 32, each with a 6-bit scale and min
constexpr int kGroups = kSuperBlock / kGroup;
constexpr int kGroup6 = 16;  // Q6_K: 16 groups of 16, each with an int8 scale
constexpr int kGroups6 = kSuperBlock / kGroup6;
// Below this magnitude a group counts as all zero (ggml's GROUP_MAX_EPS).
constexpr float kAllZero = 1e-15f;

// Adding 1.5 * 2^23 leaves v rounded to an integer (ties to even) in the low 23 mantissa bits,
// offset by 2^22; inline and branch-free, unlike a call to lrintf.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return static_cast<int>(bits & 0x007fffffu) - 0x00400000;
}

inline void store_f16(uint8_t* p, float v) {
  const uint16_t bits = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(bits & 0xff);
  p[1] = static_cast<uint8_t>(bits >> 8);
}
inline float load_f16(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// An asymmetric fit of n values to x ~ scale * q - min with q in [0, nmax], weighted by w: the
// grid search of ggml's make_qkx2_quants without mean-absolute-deviation. It starts from the
// plain min/max mapping, then tries nstep + 1 stretched grids (rmin + rdelta * step levels
// wider), solving the weighted least-squares scale and offset for each, and keeps the grid with
// the smallest weighted squared error. Returns the scale; *neg_min receives -min (>= 0, since
// the offset is never positive); q receives the quants.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* q, float* neg_min,
                    float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(q, q + n, uint8_t{0});
    *neg_min = -min;
    return 0.0f;
  }
  const float levels = static_cast<float>(nmax);
  float iscale = levels / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    q[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(q[i]) + min - x[i];
    diff = diff * diff;
    best_error += w[i] * diff;
  }
  uint8_t trial[kGroup];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + levels) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      trial[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
      diff = diff * diff;
      error += w[i] * diff;
    }
    if (error < best_error) {
      std::copy(trial, trial + n, q);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// A symmetric fit of n values to x ~ scale * (q - nmax) with q in [0, 2 nmax), weighted by x^2:
// ggml's make_qx_quants with rmse_type 1 and no importance. The scale maps the element of the
// largest magnitude to -nmax exactly; 18 neighbouring grids (nmax +- 0.1 .. 0.9) are tried and
// the one with the largest (sum w x l)^2 / sum w l^2 (the least squared error) kept.
float fit_symmetric(int n, int nmax, const float* x, int8_t* q) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kAllZero) {
    std::fill(q, q + n, int8_t{0});
    return 0.0f;
  }
  const auto level = [nmax](float iscale, float v) {
    return std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * v)));
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, x[i]);
    q[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, x[i]);
      const float w = x[i] * x[i];
      const float fl = static_cast<float>(l);
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(nmax + level(iscale, x[i]));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The 6-bit scale and min of group j of a Q4_K / Q5_K block (12 packed bytes): groups 0..3 in
// the low six bits of bytes 0..3 (scales) and 4..7 (mins); groups 4..7 keep their low four bits
// in the nibbles of bytes 8..11 and their top two bits in the top bits of bytes 0..7.
void pack_scale_min(uint8_t* packed, int j, uint8_t scale, uint8_t min) {
  if (j < 4) {
    packed[j] = scale;
    packed[j + 4] = min;
  } else {
    packed[j + 4] = static_cast<uint8_t>((scale & 0x0f) | ((min & 0x0f) << 4));
    packed[j - 4] |= static_cast<uint8_t>((scale >> 4) << 6);
    packed[j] |= static_cast<uint8_t>((min >> 4) << 6);
  }
}
void unpack_scale_min(const uint8_t* packed, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

// The shared first half of Q4_K and Q5_K: per-group fits, their scales and mins quantized to
// 6 bits against the block's f16 d and dmin (written to block[0..15]), then every element
// re-quantized against the 6-bit-rounded group scale and min. q receives 256 quants in
// [0, nmax].
void quantize_scale_min_block(const float* x, int nmax, float rmin, int nstep, uint8_t* block,
                              uint8_t* q) {
  float scales[kGroups];
  float mins[kGroups];
  float weights[kGroup];
  float max_scale = 0;  // the min is subtracted, so a group's scale is not negative
  float max_min = 0;
  for (int j = 0; j < kGroups; ++j) {
    const float* g = x + kGroup * j;
    float sum_x2 = 0;
    for (int l = 0; l < kGroup; ++l) sum_x2 += g[l] * g[l];
    const float av_x = std::sqrt(sum_x2 / kGroup);
    for (int l = 0; l < kGroup; ++l) weights[l] = av_x + std::fabs(g[l]);
    scales[j] =
        fit_scale_min(kGroup, nmax, g, weights, q + kGroup * j, &mins[j], rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* packed = block + 4;
  for (int j = 0; j < kGroups; ++j) {
    // Through uint8_t as ggml's: a (never chosen) negative group scale wraps, then clamps to 63.
    const auto ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    const auto lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    pack_scale_min(packed, j, std::min<uint8_t>(63, ls), std::min<uint8_t>(63, lm));
  }
  store_f16(block, max_scale / 63.f);
  store_f16(block + 2, max_min / 63.f);
  const float d_block = load_f16(block);
  const float dmin_block = load_f16(block + 2);
  for (int j = 0; j < kGroups; ++j) {
    uint8_t sc, m;
    unpack_scale_min(packed, j, &sc, &m);
    const float d = d_block * static_cast<float>(sc);
    if (d == 0) continue;  // the group keeps the quants of its fit
    const float dm = dmin_block * static_cast<float>(m);
    for (int l = 0; l < kGroup; ++l) {
      const int v = nearest_int((x[kGroup * j + l] + dm) / d);
      q[kGroup * j + l] = static_cast<uint8_t>(std::max(0, std::min(nmax, v)));
    }
  }
}

}  // namespace

// block_q4_K (144 bytes): f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of
// nibbles; each 64 elements take 32 bytes, the first 32 in the low nibbles.
void quantize_q4_k_block(const float* x, uint8_t* block) {
  uint8_t q[kSuperBlock];
  quantize_scale_min_block(x, 15, -1.f, 20, block, q);
  uint8_t* qs = block + 16;
  for (int j = 0; j < kSuperBlock; j += 64, qs += 32) {
    for (int l = 0; l < 32; ++l) qs[l] = static_cast<uint8_t>(q[j + l] | (q[j + l + 32] << 4));
  }
}

// block_q5_K (176 bytes): as Q4_K with 32 bytes qh after the scales holding the fifth bits
// (bit g of qh[l]: element l of group g) and the nibbles after them.
void quantize_q5_k_block(const float* x, uint8_t* block) {
  uint8_t q[kSuperBlock];
  quantize_scale_min_block(x, 31, -0.5f, 15, block, q);
  uint8_t* qh = block + 16;
  uint8_t* qs = block + 48;
  std::memset(qh, 0, 32);
  for (int j = 0, group = 0; j < kSuperBlock; j += 64, group += 2, qs += 32) {
    for (int l = 0; l < 32; ++l) {
      const int lo = q[j + l];
      const int hi = q[j + l + 32];
      qh[l] |= static_cast<uint8_t>(((lo >> 4) << group) | ((hi >> 4) << (group + 1)));
      qs[l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
    }
  }
}

// block_q6_K (210 bytes): 128 bytes ql (low nibbles), 64 bytes qh (high two bits), 16 int8
// group scales, f16 d. Each 128 elements use 64 ql and 32 qh bytes: element l + 32 k (l < 32,
// k < 4) is nibble k / 2 of ql[l + 32 (k % 2)] and bits 2k..2k+1 of qh[l].
void quantize_q6_k_block(const float* x, uint8_t* block) {
  int8_t q[kSuperBlock];
  float scales[kGroups6];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int g = 0; g < kGroups6; ++g) {
    scales[g] = fit_symmetric(kGroup6, 32, x + kGroup6 * g, q + kGroup6 * g);
    const float abs_scale = std::fabs(scales[g]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[g];
    }
  }
  if (max_abs_scale < kAllZero) {
    std::memset(block, 0, 210);  // d = +0 as f16 too
    return;
  }
  auto* block_scales = reinterpret_cast<int8_t*>(block + 192);
  const float iscale = -128.f / max_scale;
  store_f16(block + 208, 1 / iscale);
  for (int g = 0; g < kGroups6; ++g)
    block_scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
  const float d_block = load_f16(block + 208);
  for (int g = 0; g < kGroups6; ++g) {
    const float d = d_block * static_cast<float>(block_scales[g]);
    if (d == 0) continue;  // the group keeps the quants of its fit
    for (int l = 0; l < kGroup6; ++l) {
      const int v = nearest_int(x[kGroup6 * g + l] / d);
      q[kGroup6 * g + l] = static_cast<int8_t>(std::max(-32, std::min(31, v)) + 32);
    }
  }
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  for (int j = 0; j < kSuperBlock; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = q[j + l], q2 = q[j + l + 32], q3 = q[j + l + 64], q4 = q[j + l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0x0f) | ((q4 & 0x0f) << 4));
      qh[l] =
          static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

}  // namespace deepinfer::kquants
