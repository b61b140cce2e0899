#pragma once
// Internal to attention_avx512.cpp (AVX512BW products) and attention_i8_avx512vnni.cpp
// (vpdpbusd): the int8 scores (attend_i8.h) of up to 8 queries against the 16 keys of a chunk,
// with the keys along the lanes. A 64-byte block of the 16 rows is transposed as 32-bit lanes,
// so lane j of column c holds dimensions 4c .. 4c + 3 of key j, and each column is one integer
// dot product per query (4 products per lane). Include after simd_avx512.h.
#include "kernels/attend_i8.h"
#include "kernels/attend_rows.h"
#include "kernels/simd_avx512.h"

namespace deepinfer::kernels::detail::avx512 {

namespace {

// scores[i * 16 + j] = score(q[i], key rows[j]) for T queries; i8_simd_group(k.group).
// Dot::dot(acc, q, d, k) adds to each lane the products of the query's dimensions d .. d + 3
// with the lane's 4 bytes of k. With Dot::kOffset it multiplies the query's u8 = q8 + 128
// (vpdpbusd's unsigned operand), and Dot::key_sum(sum, k) gathers the bytes' sums, 128 times
// which are taken back out.
template <class Dot, int T>
void i8_chunk_scores(const I8Rows& k, const int64_t* rows, const I8Query* q, float* scores) {
  DEEPINFER_UNROLL
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(scores + i * kLanes, _mm512_setzero_ps());
  // The scales of the 16 rows are gathered per group: row r's at r * scale_stride + g.
  const __m512i stride = _mm512_set1_epi64(k.scale_stride);
  const __m512i srow_lo = _mm512_mullo_epi64(_mm512_loadu_si512(rows), stride);
  const __m512i srow_hi = _mm512_mullo_epi64(_mm512_loadu_si512(rows + 8), stride);
  // A group is 1, 2, 4, 8 or 16 columns (i8_simd_group): a group ends after column c where
  // (c + 1) & group_end_mask is 0; groups are folded in order (no divisions per column).
  const int64_t group_end_mask = k.group / 4 - 1;
  int64_t g = 0;
  __m512i acc[T], sumk = _mm512_setzero_si512();
  DEEPINFER_UNROLL
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_si512();
  // Folds group g's integer sums into the scores: score += isum * (q scale * k scale).
  auto fold = [&]() {
    const __m256 lo = _mm512_i64gather_ps(srow_lo, k.scales + g, 4);
    const __m256 hi = _mm512_i64gather_ps(srow_hi, k.scales + g, 4);
    const __m512 sk = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    const __m512i offset = _mm512_slli_epi32(sumk, 7);
    DEEPINFER_UNROLL
    for (int i = 0; i < T; ++i) {
      __m512i isum = acc[i];
      if constexpr (Dot::kOffset) isum = _mm512_sub_epi32(isum, offset);
      const __m512 w = _mm512_mul_ps(_mm512_set1_ps(q[i].scales[g]), sk);
      float* s = scores + i * kLanes;
      _mm512_storeu_ps(s, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), w, _mm512_loadu_ps(s)));
      acc[i] = _mm512_setzero_si512();
    }
    sumk = _mm512_setzero_si512();
    ++g;
  };
  for (int64_t d0 = 0; d0 < k.head_dim; d0 += 64) {
    const int64_t left = k.head_dim - d0;
    const __mmask64 m = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
    __m512 c[16];
    DEEPINFER_UNROLL
    for (int j = 0; j < 16; ++j)
      c[j] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi8(m, k.base + rows[j] * k.stride + d0));
    transpose16(c);
    const int64_t cols = left >= 64 ? 16 : left / 4;
    DEEPINFER_UNROLL
    for (int col = 0; col < 16; ++col) {
      if (col >= cols) break;
      const __m512i kc = _mm512_castps_si512(c[col]);
      if constexpr (Dot::kOffset) sumk = Dot::key_sum(sumk, kc);
      DEEPINFER_UNROLL
      for (int i = 0; i < T; ++i) acc[i] = Dot::dot(acc[i], q[i], d0 + 4 * col, kc);
      if (((col + 1) & group_end_mask) == 0) fold();
    }
  }
}

// i8_chunk_scores for a run-time number of queries n (1 .. 8).
template <class Dot>
void i8_chunk_scores_n(const I8Rows& k, const int64_t* rows, const I8Query* q, int64_t n,
                       float* scores) {
  with_tile_size<8>(
      n, [&](auto queries) { i8_chunk_scores<Dot, decltype(queries)::value>(k, rows, q, scores); });
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx512
