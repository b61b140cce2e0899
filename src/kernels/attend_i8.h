#pragma once
// Internal to the attend() backends and the reference: attention scores against an int8 K
// cache, computed on integers as llama.cpp does for a q8_0 K cache.
//
// The query is quantized as the cache rows are (quantize_i8: one scale per group of
// a.group elements), and
//   score(q, k) = sum over groups g, in order, of float(isum_g) * (sq_g * sk_g),
// accumulated from 0 with one fused multiply-add per group, where isum_g is the exact
// integer sum over the group of q8[d] * k8[d]. |isum_g| <= group * 127^2 < 2^24 for groups
// up to 1024, so a backend may sum in int32 (VNNI) or in f32 on the integer values, in any
// order: every backend gives the same score bits, and decode, prefill and the reference agree.
// V rows, and K rows where V is their leading part (i8_integer_scores), are still widened to
// scale * value (attend_rows.h).
//
// Everything here is `static`: each ISA file gets its own copy (see backend.h).
#include <cstdint>

#include "core/dtype.h"
#include "kernels/backend.h"

namespace deepinfer::kernels::detail {

// Which int8 caches score on integers: all but those whose V rows are the leading part of their
// K rows (MLA's latent cache, one row for both). There each row is widened once for K and V,
// and the scores stay the f32 dot products of the widened values, so the result agrees to
// rounding with attention over f32 keys computed from the same values (MLA's expanded form).
// (The backends ask attend_rows.h's overload for AttendArgs.)
static inline bool i8_integer_scores(const PagedKv& kv) {
  const int64_t v_stride = kv.v_row_stride ? kv.v_row_stride : kv.v_head_dim;
  return kv.dtype == DType::i8 &&
         !(kv.v == kv.k && v_stride == kv.head_dim && kv.v_scale == kv.k_scale);
}

// The largest group whose integer sums f32 holds exactly.
inline constexpr int64_t kMaxI8ScoreGroup = 1024;

// A quantized query in scratch floats, for head_dim rounded up to P = a multiple of 64:
// [0, P) the int8 values as floats (0 past head_dim), then P bytes of the int8 values (0 past
// head_dim), P bytes of the values + 128 as uint8 (VNNI's unsigned operand), then the
// head_dim / group scales.
static inline int64_t i8_query_padded(int64_t head_dim) {
  return (head_dim + 63) / 64 * 64;
}

static inline int64_t i8_query_floats(int64_t head_dim, int64_t group) {
  const int64_t p = i8_query_padded(head_dim);
  return p + p / 2 + head_dim / group;
}

struct I8Query {
  const float* values = nullptr;  // [P] float(q8)
  const int8_t* q8 = nullptr;     // [P]
  const uint8_t* u8 = nullptr;    // [P] q8 + 128
  const float* scales = nullptr;  // [head_dim / group]
};

static inline I8Query i8_query_at(const float* stored, int64_t head_dim) {
  const int64_t p = i8_query_padded(head_dim);
  I8Query q;
  q.values = stored;
  q.q8 = reinterpret_cast<const int8_t*>(stored + p);
  q.u8 = reinterpret_cast<const uint8_t*>(stored + p + p / 4);
  q.scales = stored + p + p / 2;
  return q;
}

// Quantizes q[head_dim] into dst (i8_query_floats floats).
static inline I8Query quantize_query_i8(const float* q, int64_t head_dim, int64_t group,
                                        float* dst) {
  const int64_t p = i8_query_padded(head_dim);
  auto* q8 = reinterpret_cast<int8_t*>(dst + p);
  auto* u8 = reinterpret_cast<uint8_t*>(dst + p + p / 4);
  quantize_i8(q, group, static_cast<size_t>(head_dim), q8, dst + p + p / 2);
  for (int64_t d = 0; d < p; ++d) {
    if (d >= head_dim) q8[d] = 0;
    dst[d] = static_cast<float>(q8[d]);
    u8[d] = static_cast<uint8_t>(q8[d] + 128);
  }
  return i8_query_at(dst, head_dim);
}

// score(q, k) of one stored row k8 (head_dim values, scales sk): the definition above.
static inline float i8_score(const I8Query& q, const int8_t* k8, const float* sk, int64_t head_dim,
                             int64_t group) {
  float acc = 0.0f;
  for (int64_t g0 = 0, g = 0; g0 < head_dim; g0 += group, ++g) {
    int32_t isum = 0;
    for (int64_t d = g0; d < g0 + group; ++d)
      isum += static_cast<int32_t>(q.q8[d]) * static_cast<int32_t>(k8[d]);
    acc = __builtin_fmaf(static_cast<float>(isum), q.scales[g] * sk[g], acc);
  }
  return acc;
}

// The same score from the row's integer values as floats (kf[d] = float(k8[d])).
static inline float i8_score_widened(const I8Query& q, const float* kf, const float* sk,
                                     int64_t head_dim, int64_t group) {
  float acc = 0.0f;
  for (int64_t g0 = 0, g = 0; g0 < head_dim; g0 += group, ++g) {
    float isum = 0.0f;
    for (int64_t d = g0; d < g0 + group; ++d) isum += q.values[d] * kf[d];
    acc = __builtin_fmaf(isum, q.scales[g] * sk[g], acc);
  }
  return acc;
}

namespace avx512 {

// One stored int8 K matrix as the AVX-512 chunk scores read it.
struct I8Rows {
  const int8_t* base = nullptr;  // row r at base + r * stride
  int64_t stride = 0;
  const float* scales = nullptr;  // row r's group scales at scales + r * scale_stride
  int64_t scale_stride = 0;
  int64_t head_dim = 0;
  int64_t group = 0;
};

// The groups the AVX-512 chunk scores take: whole 32-bit lanes, never across a 64-byte block.
static inline bool i8_simd_group(int64_t group) {
  return group % 4 == 0 && 64 % group == 0;
}

// scores[i * 16 + j] = i8_score(q[i], key row rows[j]) for n (1 .. 8) queries and the 16 keys of
// a chunk (attention_i8_avx512.h), i8_simd_group(k.group): with AVX512BW products
// (attention_avx512.cpp) and with vpdpbusd (attention_i8_avx512vnni.cpp, AVX512_VNNI CPUs).
void i8_chunk_scores_bw(const I8Rows& k, const int64_t* rows, const I8Query* q, int64_t n,
                        float* scores);
void i8_chunk_scores_vnni(const I8Rows& k, const int64_t* rows, const I8Query* q, int64_t n,
                          float* scores);

}  // namespace avx512

}  // namespace deepinfer::kernels::detail
