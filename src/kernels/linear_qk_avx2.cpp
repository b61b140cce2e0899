// AVX2 block-weight linear for the per-lane types q5_1 / q6_k. One 256-bit step is one
// 32-element block (linear_qk_decode.h): its 8 four-element int32 lanes via vpmaddubsw +
// vpmaddwd (exact), scaled per lane into the even-block or odd-block accumulator, so that after
// hsum(even + odd) the result is bitwise the scalar and AVX-512 one (kernels.h).
#include "kernels/backend.h"
#include "kernels/linear_qk_decode.h"
#include "kernels/linear_qpanel_avx2.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

using qk::kWithMin;

constexpr int64_t kQPanelRows = 64;
constexpr int64_t kQStreamRows = 8;

// acc + per 32-bit lane the sum of 4 products u8 (<= 63) by s8.
inline __m256i unsigned_dot(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

// One x block: quants, d_x per lane and its lane term (-o s as the integer start, or d_x * s).
struct XBlock {
  __m256i q;
  __m256 d;
  __m256i offset;
  __m256 ds;
};

template <DType W>
inline XBlock x_block(const LinearArgs& a, int64_t i, int64_t b, int64_t blocks) {
  XBlock x;
  const int64_t at = (i * blocks + b) * 8;
  x.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + i * a.k + b * kQuantBlock));
  x.d = _mm256_loadu_ps(a.xd + at);
  const __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xt + at));
  x.offset = kWithMin<W> ? _mm256_setzero_si256() : t;
  x.ds = _mm256_castsi256_ps(t);
  return x;
}

template <DType W, int MR, int NR, bool PF>
void q_tile(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / qk::kSubBlocks<W> * qk::kStoredBytes<W>;
  const uint8_t* wr[NR];
  DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c)
    wr[c] = static_cast<const uint8_t*>(a.w) + (j0 + min64(c, cols - 1)) * row_bytes;
  __m256 acc[2][MR][NR];  // even blocks, odd blocks
  DEEPINFER_UNROLL
  for (int h = 0; h < 2; ++h) DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[h][r][c] = _mm256_setzero_ps();

  auto step = [&](int64_t b, __m256(*into)[NR]) {
    XBlock x[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) x[r] = x_block<W>(a, i0 + r, b, blocks);
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      if constexpr (PF)
        _mm_prefetch(reinterpret_cast<const char*>(wr[c] + qk::block_byte<W>(b) + NR * row_bytes),
                     _MM_HINT_T0);
      const qk::WBlock w = qk::decode<W>(wr[c], b);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        const __m256i t = unsigned_dot(x[r].offset, w.q, x[r].q);
        into[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(w.d, x[r].d), _mm256_cvtepi32_ps(t), into[r][c]);
        if constexpr (kWithMin<W>) into[r][c] = _mm256_fmadd_ps(w.m, x[r].ds, into[r][c]);
      }
    }
  };
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    step(b, acc[0]);
    step(b + 1, acc[1]);
  }
  if (b < blocks) step(b, acc[0]);

  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    float* yr = a.y + (i0 + r) * a.n + j0;
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      if (c < cols) {
        const float v = hsum(_mm256_add_ps(acc[0][r][c], acc[1][r][c]));
        yr[c] = a.bias ? v + a.bias[j0 + c] : v;
      }
    }
  }
}

// q6_k a super-block at a time: the lane scales of its 8 blocks are computed once per weight
// row (the 16 group scales d * scale, groups 0-7 in `d` and 8-15 in `m`), each block then takes
// its lanes with one permute. Same values as qk::decode() (exact products): bitwise the q_tile
// result.
template <DType W>
inline void super_tables(const uint8_t* super, __m256& d, __m256& m) {
  const __m256 scale = _mm256_set1_ps(qk::f16_at(super + 208));
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(super + 192));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(super + 200));
  d = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
  m = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
}

template <DType W, int MR, int NR, bool PF>
void q_tile_super(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t supers = blocks / 8;
  const int64_t row_bytes = supers * qk::kStoredBytes<W>;
  const uint8_t* wr[NR];
  DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c)
    wr[c] = static_cast<const uint8_t*>(a.w) + (j0 + min64(c, cols - 1)) * row_bytes;
  __m256 acc[2][MR][NR];  // even blocks, odd blocks
  DEEPINFER_UNROLL
  for (int h = 0; h < 2; ++h) DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[h][r][c] = _mm256_setzero_ps();

  const __m256i pairs = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  for (int64_t sb = 0; sb < supers; ++sb) {
    __m256 td[NR], tm[NR];
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      const uint8_t* super = wr[c] + sb * qk::kStoredBytes<W>;
      if constexpr (PF) {
        for (int64_t line = 0; line < qk::kStoredBytes<W>; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(super + NR * row_bytes + line), _MM_HINT_T0);
      }
      super_tables<W>(super, td[c], tm[c]);
    }
    DEEPINFER_UNROLL
    for (int j = 0; j < 8; ++j) {
      const int64_t b = sb * 8 + j;
      XBlock x[MR];
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) x[r] = x_block<W>(a, i0 + r, b, blocks);
      // q6_k: groups 2 j, 2 j + 1 of the table half j / 4; else sub-block j.
      const __m256i index = W == DType::q6_k
                                ? _mm256_add_epi32(_mm256_set1_epi32(2 * (j % 4)), pairs)
                                : _mm256_set1_epi32(j);
      auto& into = acc[j % 2];
      DEEPINFER_UNROLL
      for (int c = 0; c < NR; ++c) {
        const uint8_t* super = wr[c] + sb * qk::kStoredBytes<W>;
        const __m256i wq = qk::block_quants<W>(super, j);
        const __m256 table = W == DType::q6_k && j >= 4 ? tm[c] : td[c];
        const __m256 dw = _mm256_permutevar8x32_ps(table, index);
        const __m256 mw = kWithMin<W> ? _mm256_permutevar8x32_ps(tm[c], index) : dw;
        DEEPINFER_UNROLL
        for (int r = 0; r < MR; ++r) {
          const __m256i t = unsigned_dot(x[r].offset, wq, x[r].q);
          into[r][c] =
              _mm256_fmadd_ps(_mm256_mul_ps(dw, x[r].d), _mm256_cvtepi32_ps(t), into[r][c]);
          if constexpr (kWithMin<W>) into[r][c] = _mm256_fmadd_ps(mw, x[r].ds, into[r][c]);
        }
      }
    }
  }

  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    float* yr = a.y + (i0 + r) * a.n + j0;
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      if (c < cols) {
        const float v = hsum(_mm256_add_ps(acc[0][r][c], acc[1][r][c]));
        yr[c] = a.bias ? v + a.bias[j0 + c] : v;
      }
    }
  }
}

template <DType W, int MR, int NR, bool PF>
void q_tiles(const LinearArgs& a, int64_t i0, int64_t j_begin, int64_t j_end) {
  for (int64_t j = j_begin; j < j_end; j += NR)
    if constexpr (qk::kSubBlocks<W> == 8) {
      q_tile_super<W, MR, NR, PF>(a, i0, j, min64(NR, j_end - j));
    } else {
      q_tile<W, MR, NR, PF>(a, i0, j, min64(NR, j_end - j));
    }
}

template <DType W, bool PF>
void q_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t jp = n0; jp < n1; jp += kQPanelRows) {
    const int64_t jp_end = min64(jp + kQPanelRows, n1);
    int64_t i = m0;
    for (; i + 2 <= m1; i += 2) q_tiles<W, 2, 2, PF>(a, i, jp, jp_end);
    if (i < m1) q_tiles<W, 1, 2, true>(a, i, jp, jp_end);
  }
}

template <DType W>
void rows_of(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (m1 - m0 <= kQStreamRows) return q_rows<W, true>(a, m0, m1, n0, n1);
  qpanel::linear_rows<W>(a, m0, m1, n0, n1);
}

}  // namespace

void linear_rows_qk(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  switch (a.w_dtype) {
    case DType::q5_1:
      return rows_of<DType::q5_1>(a, m0, m1, n0, n1);
    default:
      return rows_of<DType::q6_k>(a, m0, m1, n0, n1);
  }
}

}  // namespace deepinfer::kernels::detail::avx2
