// AVX-512BW block-weight linear for the per-lane types q5_1 / q6_k on CPUs without VNNI:
// the unsigned weight quants (<= 63) times the signed x quants through vpmaddubsw (pairs into
// int16, no saturation: |pair| <= 2 * 63 * 127) and vpmaddwd.
#include "kernels/linear_qk_avx512.h"  // first: see simd_avx512.h

namespace deepinfer::kernels::detail::avx512 {
namespace {

struct QkDotBw {
  static __m512i unsigned_dot(__m512i acc, __m512i u, __m512i s) {
    const __m512i pairs = _mm512_maddubs_epi16(u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
};

}  // namespace

void linear_rows_qk(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  qk_linear_rows<QkDotBw>(a, m0, m1, n0, n1);
}

}  // namespace deepinfer::kernels::detail::avx512
