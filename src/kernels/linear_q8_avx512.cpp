// AVX-512BW block-weight linear for CPUs without VNNI: u8 x s8 products through vpmaddubsw
// (pairs into int16, which cannot saturate here: |products| <= 128 * 127) and vpmaddwd.
// q8_0 weights are signed, so |w| times x with w's sign (the llama.cpp trick) feeds it: the
// transposed weights stay as stored and the x block term is not needed (kQ8Offset false).
#include "kernels/linear_q8_avx512.h"  // first: see simd_avx512.h

namespace deepinfer::kernels::detail::avx512 {
namespace {

struct DotBw {
  static constexpr bool kQ8Offset = false;
  // acc + per 32-bit lane the sum of 4 products u8 (0..255, here <= 128) by s8.
  static __m512i unsigned_dot(__m512i acc, __m512i u, __m512i s) {
    const __m512i pairs = _mm512_maddubs_epi16(u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
  static __m512i q8_weights(__m512i w) { return w; }
  static __m512i q8_dot(__m512i acc, __m512i w, __m512i x) {
    const __mmask64 negative = _mm512_movepi8_mask(w);
    const __m512i signed_x = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
    return unsigned_dot(acc, _mm512_abs_epi8(w), signed_x);
  }
};

}  // namespace

void linear_rows_q8(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  q_linear_rows<DotBw>(a, m0, m1, n0, n1);
}

}  // namespace deepinfer::kernels::detail::avx512
