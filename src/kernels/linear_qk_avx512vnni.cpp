// AVX-512 VNNI block-weight linear for the per-lane types q5_1 / q6_k: the weight quants
// are unsigned, so vpdpbusd adds each lane's 4 products to the accumulator in one instruction.
#include "kernels/linear_qk_avx512.h"  // first: see simd_avx512.h

namespace deepinfer::kernels::detail::avx512 {
namespace {

struct QkDotVnni {
  static __m512i unsigned_dot(__m512i acc, __m512i u, __m512i s) {
    return _mm512_dpbusd_epi32(acc, u, s);
  }
};

}  // namespace

void linear_rows_qk_vnni(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  qk_linear_rows<QkDotVnni>(a, m0, m1, n0, n1);
}

}  // namespace deepinfer::kernels::detail::avx512
