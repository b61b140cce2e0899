// The int8 chunk scores of the AVX-512 attention (attention_i8_avx512.h) with vpdpbusd: one
// instruction adds the 4 products u8 x s8 of each 32-bit lane. The query is the unsigned
// operand, q8 + 128; the keys' byte sums (one more vpdpbusd per column, shared by the queries)
// take the 128 back out.
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/attention_i8_avx512.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

struct DotVnni {
  static constexpr bool kOffset = true;
  static __m512i dot(__m512i acc, const I8Query& q, int64_t d, __m512i k) {
    return _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(load_u32(q.u8 + d)), k);
  }
  static __m512i key_sum(__m512i sum, __m512i k) {
    return _mm512_dpbusd_epi32(sum, _mm512_set1_epi8(1), k);
  }
  static int32_t load_u32(const uint8_t* p) {
    int32_t v;
    __builtin_memcpy(&v, p, sizeof(v));
    return v;
  }
};

}  // namespace

void i8_chunk_scores_vnni(const I8Rows& k, const int64_t* rows, const I8Query* q, int64_t n,
                          float* scores) {
  i8_chunk_scores_n<DotVnni>(k, rows, q, n, scores);
}

}  // namespace deepinfer::kernels::detail::avx512
