// AVX-512 VNNI block-weight linear: vpdpbusd adds the 4 u8 x s8 products of each 32-bit lane
// to the accumulator in one instruction. q8_0 weights are signed: w + 128 (w ^ 0x80) is
// unsigned (the transposed weights are kept so), and the accumulator starts at the x block
// term, -128 * the block's x sum, to take the 128 back out.
#include "kernels/linear_q8_avx512.h"  // first: see simd_avx512.h

namespace deepinfer::kernels::detail::avx512 {
namespace {

struct DotVnni {
  static constexpr bool kQ8Offset = true;
  static __m512i unsigned_dot(__m512i acc, __m512i u, __m512i s) {
    return _mm512_dpbusd_epi32(acc, u, s);
  }
  static __m512i q8_weights(__m512i w) { return _mm512_xor_si512(w, _mm512_set1_epi8(-128)); }
  static __m512i q8_dot(__m512i acc, __m512i u, __m512i x) {
    return _mm512_dpbusd_epi32(acc, u, x);
  }
};

}  // namespace

void linear_rows_q8_vnni(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  q_linear_rows<DotVnni>(a, m0, m1, n0, n1);
}

}  // namespace deepinfer::kernels::detail::avx512
