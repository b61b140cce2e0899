#pragma once
// The x side of one step of the AVX-512 block kernels (q8 and k-quant alike): one 32-element
// x block's int8 quants, its 8 lane scales and its 8 lane terms, as quantize_x laid them out.
// Lone: the last block of an odd count, in lanes 0-7 (lanes 8-15 masked off).
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

struct XStep {
  __m512i q;
  __m512 d;
  __m512i offset;
  __m512 ds;
};

// Loads q and d of block b of x row i into `x`; returns the lane terms (the caller makes the
// offset and ds of its weight type from them).
template <bool Lone>
inline __m512i load_x_block(const LinearArgs& a, int64_t i, int64_t b, int64_t blocks, XStep& x) {
  const int64_t at = (i * blocks + b) * 8;
  const int8_t* q = a.xq + i * a.k + b * kQuantBlock;
  if constexpr (Lone) {
    x.q = _mm512_maskz_loadu_epi8(0xffffffffull, q);
    x.d = _mm512_maskz_loadu_ps(0x00ff, a.xd + at);
    return _mm512_maskz_loadu_epi32(0x00ff, a.xt + at);
  } else {
    x.q = _mm512_loadu_si512(q);
    x.d = _mm512_loadu_ps(a.xd + at);
    return _mm512_loadu_si512(a.xt + at);
  }
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx512
