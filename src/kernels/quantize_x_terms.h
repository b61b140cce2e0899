#pragma once
// The per-block outputs of quantize_x_blocks (backend.h) besides the quants: each block's
// scale d and the term t its weight type wants, written 8 times per block. One statement for
// the baseline quantizer and the AVX2 / AVX-512 ones, so all of them store the same values.
// The functions have internal linkage (static) and Terms is a plain aggregate (no constructor
// to emit): the ISA files include this too, and no copy compiled with their flags may be
// picked for the whole program. terms_of() is baseline code (quantize_x.cpp): the dispatcher
// passes its result to the ISA quantizers.
#include <cstdint>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/dtype.h"

namespace deepinfer::kernels::detail::qx {

// What a weight type takes from x: the offset o of its unsigned quants (the integer term is
// -o times a sum; q8_0's 128 serves VNNI's w + 128), or, with float_term, the f32 bits of
// d * float(sum) (types with a min); whole_block: one term from the block's sum (kernels.h),
// else per lane l from s[l] = q[4l] + ... + q[4l + 3].
struct Terms {
  int32_t offset;
  bool float_term;
  bool whole_block;
};

Terms terms_of(DType w_dtype);

static inline int32_t term_of(const Terms& terms, float scale, int32_t sum) {
  if (!terms.float_term) return -terms.offset * sum;
  const float term = scale * static_cast<float>(sum);
  int32_t bits;
  std::memcpy(&bits, &term, sizeof(bits));
  return bits;
}

// One block's 8 entries of d and t from its scale and lane sums s[8].
static inline void store_terms(const Terms& terms, float scale, const int32_t* s, float* d,
                               int32_t* t) {
  int32_t block_term = 0;
  if (terms.whole_block) {
    int32_t sum = 0;
    for (int l = 0; l < 8; ++l) sum += s[l];
    block_term = term_of(terms, scale, sum);
  }
  for (int l = 0; l < 8; ++l) {
    d[l] = scale;
    t[l] = terms.whole_block ? block_term : term_of(terms, scale, s[l]);
  }
}

// The block's scale from max |x| (NaN anywhere: NaN, so it reaches the outputs as in f32) and
// the factor its values are multiplied by before rounding.
static inline float block_scale(float amax, bool nan) {
  return nan ? __builtin_nanf("") : amax / 127.0f;
}
static inline float block_inverse(float scale) {
  return scale > 0.0f ? 1.0f / scale : 0.0f;
}

#if defined(__AVX2__)
// The SIMD quantizers' common end of a block (AVX2 and AVX-512 files only): its 32 quants
// stored, the lane sums s[l] = q[4l] + ... + q[4l + 3] taken as pairs, then pairs of pairs,
// and its d / t entries.
static inline void store_block(const Terms& terms, __m256i quants, float scale, int8_t* q, float* d,
                               int32_t* t) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), quants);
  alignas(32) int32_t s[8];
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), quants);
  _mm256_store_si256(reinterpret_cast<__m256i*>(s), _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  store_terms(terms, scale, s, d, t);
}
#endif

}  // namespace deepinfer::kernels::detail::qx
