// AVX2 block-weight linear for the 32-element types with one scale per block: q4_1 here (one
// 256-bit step is one block: its 8 four-element int32 lanes via vpmaddubsw + vpmaddwd, exact,
// scaled into the even-block or odd-block accumulator, so that after hsum(even + odd) the
// result is bitwise the AVX-512 one; kernels.h states the arithmetic), the whole-block types
// q4_0 / q5_0 / q8_0 / q4_k / q5_k in linear_whole_block_avx2.h.
#include "kernels/backend.h"
#include "kernels/linear_whole_block_avx2.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

constexpr int64_t kQPanelRows = 64;
constexpr int64_t kQStreamRows = 8;

constexpr int64_t kQ41BlockBytes = 20;
constexpr int64_t kQ41QuantsAt = 4;

inline float f16_at(const uint8_t* p) {
  return _cvtsh_ss(static_cast<unsigned short>(p[0] | (p[1] << 8)));
}

// acc + per 32-bit lane the sum of 4 products u8 (<= 128) by s8.
inline __m256i unsigned_dot(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

// The 32 weight nibbles of a q4_1 block in element order, as unsigned bytes.
inline __m256i block_quants(const uint8_t* block) {
  const __m256i qs = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQ41QuantsAt)));
  return _mm256_and_si256(_mm256_srlv_epi64(qs, _mm256_set_epi64x(4, 4, 0, 0)),
                          _mm256_set1_epi8(0x0f));
}

// One x block: quants, d_x broadcast and its lane term d_x * s.
struct XBlock {
  __m256i q;
  __m256 d;
  __m256 ds;
};

inline XBlock x_block(const LinearArgs& a, int64_t i, int64_t b, int64_t blocks) {
  XBlock x;
  const int64_t at = (i * blocks + b) * 8;
  x.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + i * a.k + b * kQuantBlock));
  x.d = _mm256_loadu_ps(a.xd + at);
  x.ds = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xt + at)));
  return x;
}

template <int MR, int NR, bool PF>
void q_tile(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks * kQ41BlockBytes;
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
    for (int r = 0; r < MR; ++r) x[r] = x_block(a, i0 + r, b, blocks);
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      const uint8_t* block = wr[c] + b * kQ41BlockBytes;
      if constexpr (PF)
        _mm_prefetch(reinterpret_cast<const char*>(block + NR * row_bytes), _MM_HINT_T0);
      const float dw = f16_at(block);
      const __m256 mw = _mm256_set1_ps(f16_at(block + 2));
      const __m256i w = block_quants(block);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        const __m256i t = unsigned_dot(_mm256_setzero_si256(), w, x[r].q);
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(dw), x[r].d);
        into[r][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(t), into[r][c]);
        into[r][c] = _mm256_fmadd_ps(mw, x[r].ds, into[r][c]);
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

template <int MR, int NR, bool PF>
void q_tiles(const LinearArgs& a, int64_t i0, int64_t j_begin, int64_t j_end) {
  for (int64_t j = j_begin; j < j_end; j += NR) q_tile<MR, NR, PF>(a, i0, j, min64(NR, j_end - j));
}

template <bool PF>
void q_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t jp = n0; jp < n1; jp += kQPanelRows) {
    const int64_t jp_end = min64(jp + kQPanelRows, n1);
    int64_t i = m0;
    for (; i + 2 <= m1; i += 2) q_tiles<2, 2, PF>(a, i, jp, jp_end);
    if (i < m1) q_tiles<1, 2, true>(a, i, jp, jp_end);
  }
}

}  // namespace

void linear_rows_q8(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (a.w_dtype != DType::q4_1) return whole_block_linear_rows(a, m0, m1, n0, n1);
  const bool stream = m1 - m0 <= kQStreamRows;
  return stream ? q_rows<true>(a, m0, m1, n0, n1) : q_rows<false>(a, m0, m1, n0, n1);
}

}  // namespace deepinfer::kernels::detail::avx2
