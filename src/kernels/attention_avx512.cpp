// AVX-512 span attention (attention_span.h): keys along the lanes, K/V widened in registers,
// a tile of up to 8 query vectors sharing every K/V load.
// GCC 12 also reports the _mm512_undefined_ps() idiom of the intrinsic headers as
// -Wuninitialized once the exp() and transposes here are inlined (GCC bug 105593, as in
// simd_avx512.h); the warning points into the header, so it is silenced before the include.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/attend_rows.h"
#include "kernels/attention_i8_avx512.h"
#include "kernels/attention_span.h"
#include "kernels/isa.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int kTile = 8;  // query vectors per register tile (8 accumulators + 16 K columns)
// Queries of a wide tile, one per lane: 16 consecutive queries that all read a chunk (MLA's
// heads of one token) take their scores with the queries along the lanes (chunk_scores_wide).
constexpr int kWide = 16;

enum class Kind { f32, f16, bf16, i8 };

// One stored K or V matrix: row r (a (slot, kv head) pair) starts at element r * stride.
struct Rows {
  Rows(const void* base_, int64_t stride_, const float* scales_, int64_t group_)
      : base(static_cast<const char*>(base_)),
        stride(stride_),
        scales(scales_),
        group(group_),
        scale_stride(group_ > 0 ? stride_ / group_ : 0) {
    // Groups of 16 or more elements, a power of two: a 16-lane vector at a multiple of 16 lies
    // in one group, found by a shift (load_row runs per row and vector: no divisions there).
    if (group_ >= kLanes && (group_ & (group_ - 1)) == 0)
      while ((int64_t{1} << group_shift) < group_) ++group_shift;
  }
  const char* base;
  int64_t stride;
  const float* scales;  // i8: scales of row r at r * (stride / group)
  int64_t group;
  int64_t scale_stride;         // stride / group
  int64_t group_shift = 0;      // log2(group) when group is a power of two >= 16, else 0
  bool integer_scores = false;  // K of an int8 cache that scores on integers (attend_i8.h)
};

// Lanes [d0, d0 + 16) of row `row` as f32 (lanes outside m are 0). int8 values are
// scale * float(q), the product the reference computes.
template <Kind K>
inline __m512 load_row(const Rows& r, int64_t row, int64_t d0, __mmask16 m) {
  const int64_t at = row * r.stride + d0;
  if constexpr (K == Kind::f32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(r.base) + at);
  } else if constexpr (K == Kind::f16) {
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(r.base) + at));
  } else if constexpr (K == Kind::bf16) {
    const __m256i raw = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(r.base) + at);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  } else {
    const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
        _mm_maskz_loadu_epi8(m, reinterpret_cast<const int8_t*>(r.base) + at)));
    const float* s = r.scales + row * r.scale_stride;
    __m512 scale;
    if (r.group_shift != 0) {  // d0 is a multiple of 16 in every caller
      scale = _mm512_set1_ps(s[d0 >> r.group_shift]);
    } else if (d0 % r.group + kLanes <= r.group) {
      scale = _mm512_set1_ps(s[d0 / r.group]);
    } else {  // groups narrower than a vector, or not aligned to one
      float lanes[kLanes];
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] = (m >> l) & 1 ? s[(d0 + l) / r.group] : 0.0f;
      scale = _mm512_loadu_ps(lanes);
    }
    return _mm512_mul_ps(v, scale);
  }
}

inline float exp_scalar(float x) {
  return _mm_cvtss_f32(_mm512_castps512_ps128(exp(_mm512_set1_ps(x))));
}

// vpdpbusd's sums without VNNI (AVX512BW): |q| times k with q's sign, pairs of products
// (at most 2 * 127 * 127, no saturation) by vpmaddubsw, then pairs of pairs by vpmaddwd. Key
// bytes are never -128 (quantize_i8 clamps to +-127), whose negation would stay -128.
struct DotBw {
  static constexpr bool kOffset = false;
  static __m512i dot(__m512i acc, const I8Query& q, int64_t d, __m512i k) {
    int32_t bytes;
    __builtin_memcpy(&bytes, q.q8 + d, sizeof(bytes));
    const __m512i qb = _mm512_set1_epi32(bytes);
    const __m512i signed_k =
        _mm512_mask_sub_epi8(k, _mm512_movepi8_mask(qb), _mm512_setzero_si512(), k);
    const __m512i pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(qb), signed_k);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
};

// The int8 scores (attend_i8.h) of T quantized queries (store_query) against the chunk's keys:
// dots[i][j], as chunk_scores gives the f32 dot products.
template <int T>
inline void chunk_scores_i8(const Rows& kr, const int64_t* rows, int64_t head_dim,
                            const float* const* q, float* dots) {
  I8Query qs[T];
  DEEPINFER_UNROLL
  for (int i = 0; i < T; ++i) qs[i] = i8_query_at(q[i], head_dim);
  I8Rows k;
  k.base = reinterpret_cast<const int8_t*>(kr.base);
  k.stride = kr.stride;
  k.scales = kr.scales;
  k.scale_stride = kr.scale_stride;
  k.head_dim = head_dim;
  k.group = kr.group;
  // Groups narrower than 4 or not dividing 64: element by element (the models' caches use
  // groups of at most 32, model::kv_quant_group; other groups come from tests and tiny heads).
  if (!i8_simd_group(kr.group)) {
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < 16; ++j)
        dots[i * kLanes + j] = i8_score(qs[i], k.base + rows[j] * k.stride,
                                        k.scales + rows[j] * k.scale_stride, head_dim, k.group);
    return;
  }
  static const bool vnni = cpu_has_avx512_vnni();
  if (vnni) {
    i8_chunk_scores_vnni(k, rows, qs, T, dots);
  } else {
    i8_chunk_scores<DotBw, T>(k, rows, qs, dots);
  }
}

// dots[i][j] = q_i . k_j for the chunk's 16 keys (rows[j]) and T queries; q rows are padded
// with zeros to whole vectors. Per query the sum runs over d in order, one FMA chain per lane.
// An int8 cache: its integer scores (chunk_scores_i8).
template <Kind K, int T>
inline void chunk_scores(const Rows& kr, const int64_t* rows, int64_t head_dim,
                         const float* const* q, float* dots) {
  if constexpr (K == Kind::i8) {
    if (kr.integer_scores) return chunk_scores_i8<T>(kr, rows, head_dim, q, dots);
  }
  __m512 s[T];
  DEEPINFER_UNROLL
  for (int i = 0; i < T; ++i) s[i] = _mm512_setzero_ps();
  for (int64_t d0 = 0; d0 < head_dim; d0 += kLanes) {
    const __mmask16 m =
        head_dim - d0 >= kLanes ? static_cast<__mmask16>(0xffff) : first_lanes(head_dim - d0);
    __m512 k[16];
    DEEPINFER_UNROLL
    for (int j = 0; j < 16; ++j) k[j] = load_row<K>(kr, rows[j], d0, m);
    transpose16(k);
    DEEPINFER_UNROLL
    for (int c = 0; c < 16; ++c) {
      DEEPINFER_UNROLL
      for (int i = 0; i < T; ++i) s[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][d0 + c]), k[c], s[i]);
    }
  }
  DEEPINFER_UNROLL
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(dots + i * kLanes, s[i]);
}

// Bytes per stored element of a K / V row.
template <Kind K>
constexpr int64_t element_bytes() {
  return K == Kind::f32 ? 4 : (K == Kind::i8 ? 1 : 2);
}

// The 16 K (or V) rows of a chunk widened to f32 once for every wide tile that reads them, in
// 16 x 16 blocks: element d of row j at kwide[16 * (d0 + j) + d - d0] for d0 = d rounded down to 16
// (zero from head_dim to hd). The values load_row gives, so a tile reading them computes what
// it would reading the rows themselves. Also prefetches the next chunk's rows, as far along as
// this one: 16 rows at a row stride apart are more streams than the hardware prefetchers
// follow (measured: the loads stalled).
template <Kind K>
inline void widen_chunk(const Rows& kr, const int64_t* rows, const int64_t* next_rows,
                        int64_t head_dim, int64_t hd, float* kwide) {
  for (int64_t d0 = 0; d0 < hd; d0 += kLanes) {
    const __mmask16 m =
        head_dim - d0 >= kLanes ? static_cast<__mmask16>(0xffff) : first_lanes(head_dim - d0);
    DEEPINFER_UNROLL
    for (int j = 0; j < 16; ++j)
      _mm512_storeu_ps(kwide + kLanes * (d0 + j), load_row<K>(kr, rows[j], d0, m));
    if ((d0 * element_bytes<K>()) % 64 == 0) {  // once per line of the narrower types
      DEEPINFER_UNROLL
      for (int j = 0; j < 16; ++j)
        _mm_prefetch(kr.base + (next_rows[j] * kr.stride + d0) * element_bytes<K>(), _MM_HINT_T0);
    }
  }
}

// chunk_scores for the 16 queries of a wide tile from qt, the queries transposed (qt[d * 16 +
// i] = q_i[d], zero past head_dim), and the chunk's K widened (widen_chunk): per dimension
// one qt load and one FMA per key with that key's element broadcast, the queries along the
// lanes, so no K tile is transposed. Per (query, key) the FMA chain over d is chunk_scores'
// own, so the dots are bitwise the same; they stay by key: lane i of s[j] is q_i . k_j.
inline void chunk_scores_wide(const float* kwide, int64_t hd, const float* qt, __m512* s) {
  DEEPINFER_UNROLL
  for (int j = 0; j < kWide; ++j) s[j] = _mm512_setzero_ps();
  for (int64_t d0 = 0; d0 < hd; d0 += kLanes) {
    const float* block = kwide + kLanes * d0;
    for (int c = 0; c < 16; ++c) {
      const __m512 qv = _mm512_loadu_ps(qt + (d0 + c) * kWide);
      DEEPINFER_UNROLL
      for (int j = 0; j < 16; ++j)
        s[j] = _mm512_fmadd_ps(_mm512_set1_ps(block[j * kLanes + c]), qv, s[j]);
    }
  }
}

// acc_i = acc_i * corr_i + sum_j p_i[j] v_j over the chunk's 16 keys (p is 0 past a query's
// last key, so those terms add nothing), each V vector (load(j, d0, mask)) loaded once for
// the T queries. p_i[j] = probs[i * kLanes + j], or with by_key probs[j * kLanes + i].
template <int T, class LoadV>
inline void accumulate_values(int64_t v_dim, const float* probs, bool by_key, const float* corr,
                              float* const* acc, LoadV load) {
  const int64_t per_query = by_key ? 1 : kLanes, per_key = by_key ? kLanes : 1;
  for (int64_t d0 = 0; d0 < v_dim; d0 += kLanes) {
    const __mmask16 m =
        v_dim - d0 >= kLanes ? static_cast<__mmask16>(0xffff) : first_lanes(v_dim - d0);
    __m512 o[T];
    DEEPINFER_UNROLL
    for (int i = 0; i < T; ++i)
      o[i] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc[i] + d0), _mm512_set1_ps(corr[i]));
    for (int j = 0; j < 16; ++j) {
      const __m512 v = load(j, d0, m);
      DEEPINFER_UNROLL
      for (int i = 0; i < T; ++i)
        o[i] = _mm512_fmadd_ps(_mm512_set1_ps(probs[i * per_query + j * per_key]), v, o[i]);
    }
    DEEPINFER_UNROLL
    for (int i = 0; i < T; ++i) _mm512_mask_storeu_ps(acc[i] + d0, m, o[i]);
  }
}

// The chunk's V sums for T queries from their probabilities: from the rows, or from widened
// blocks (widen_chunk's, which hold the values load_row gives): the chunk's V rows, or
// its K rows where V is their leading part.
template <Kind K, int T>
inline void chunk_values(const Rows& vr, const int64_t* vrows, int64_t v_dim, const float* probs,
                         bool by_key, const float* corr, float* const* acc, const float* widened) {
  if (widened != nullptr) {
    accumulate_values<T>(v_dim, probs, by_key, corr, acc, [&](int j, int64_t d0, __mmask16 m) {
      return _mm512_maskz_loadu_ps(m, widened + kLanes * (d0 + j));
    });
  } else {
    accumulate_values<T>(v_dim, probs, by_key, corr, acc, [&](int j, int64_t d0, __mmask16 m) {
      return load_row<K>(vr, vrows[j], d0, m);
    });
  }
}

// The chunk's online softmax for T queries from their scores (probs[i][16], overwritten by the
// probabilities), then their V sums. The denominators are updated as one vector FMA,
// denom * corr + sum, the sums taken by hsum().
template <Kind K, int T>
inline void chunk_softmax_values(const Rows& vr, const int64_t* vrows, const AttendArgs& a,
                                 int64_t c0, const int64_t* last, float* const* acc, float* max,
                                 float* denom, float* probs) {
  static_assert(T <= kLanes, "one lane per query for the rescale factors");
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 scale = _mm512_set1_ps(a.scale);
  __m512 scores[T];
  alignas(64) float new_max[kLanes], corr[kLanes], sums[kLanes];
  DEEPINFER_UNROLL
  for (int i = 0; i < T; ++i) {
    const int64_t len = min64(kLanes, last[i] + 1 - c0);
    scores[i] = _mm512_mask_mov_ps(neg_inf, first_lanes(len),
                                   _mm512_mul_ps(_mm512_loadu_ps(probs + i * kLanes), scale));
    new_max[i] = maxf(max[i], hmax(scores[i]));
  }
  // e^(old max - new max) of the T queries in one vector exp (lane for lane what a scalar
  // exp of the same argument gives).
  const __mmask16 tm = first_lanes(T);
  const __m512 old_max = _mm512_maskz_loadu_ps(tm, max);
  const __m512 c = exp(_mm512_sub_ps(old_max, _mm512_maskz_load_ps(tm, new_max)));
  _mm512_store_ps(corr, c);
  DEEPINFER_UNROLL
  for (int i = 0; i < T; ++i) {
    const __m512 e = exp(_mm512_sub_ps(scores[i], _mm512_set1_ps(new_max[i])));  // -inf: 0
    _mm512_storeu_ps(probs + i * kLanes, e);
    sums[i] = hsum(e);
  }
  _mm512_mask_storeu_ps(
      denom, tm,
      _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, denom), c, _mm512_maskz_load_ps(tm, sums)));
  _mm512_mask_storeu_ps(max, tm, _mm512_maskz_load_ps(tm, new_max));
  chunk_values<K, T>(vr, vrows, a.v_head_dim, probs, false, corr, acc, nullptr);
}

// chunk_softmax_values for a wide tile from its scores by key (chunk_scores_wide: lane i of
// s[j] is q_i . k_j), every query reading the chunk, without transposing them: the max over
// keys is a vertical max, the denominator sum a vertical sum in hsum()'s order (lanes l and
// l + 8, then l + 4, l + 2, l + 1), the exps the same lane for lane; so per query the bits of
// chunk_softmax_values. probs gets the probabilities by key ([j][16]).
template <Kind K>
inline void wide_softmax_values(const Rows& vr, const int64_t* vrows, const AttendArgs& a,
                                int64_t c0, const int64_t* last, float* const* acc, float* max,
                                float* denom, __m512* s, float* probs, const float* widened) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 scale = _mm512_set1_ps(a.scale);
  alignas(64) int32_t final_key[kLanes];  // the last key of the chunk query i reads, 0..15
  for (int i = 0; i < kWide; ++i)
    final_key[i] = static_cast<int32_t>(min64(kLanes - 1, last[i] - c0));
  const __m512i fk = _mm512_load_si512(final_key);
  __m512 m = neg_inf;
  DEEPINFER_UNROLL
  for (int j = 0; j < kWide; ++j) {
    const __mmask16 reads = _mm512_cmpge_epi32_mask(fk, _mm512_set1_epi32(j));
    s[j] = _mm512_mask_mov_ps(neg_inf, reads, _mm512_mul_ps(s[j], scale));
    m = _mm512_max_ps(m, s[j]);
  }
  const __m512 old_max = _mm512_loadu_ps(max);
  const __m512 new_max =
      _mm512_mask_blend_ps(_mm512_cmp_ps_mask(old_max, m, _CMP_GT_OQ), m, old_max);
  alignas(64) float corr[kLanes];
  const __m512 c = exp(_mm512_sub_ps(old_max, new_max));
  _mm512_store_ps(corr, c);
  DEEPINFER_UNROLL
  for (int j = 0; j < kWide; ++j) {
    s[j] = exp(_mm512_sub_ps(s[j], new_max));  // -inf: 0
    _mm512_storeu_ps(probs + j * kLanes, s[j]);
  }
  DEEPINFER_UNROLL
  for (int l = 0; l < 8; ++l) s[l] = _mm512_add_ps(s[l], s[l + 8]);
  DEEPINFER_UNROLL
  for (int l = 0; l < 4; ++l) s[l] = _mm512_add_ps(s[l], s[l + 4]);
  s[0] = _mm512_add_ps(s[0], s[2]);
  s[1] = _mm512_add_ps(s[1], s[3]);
  const __m512 sum = _mm512_add_ps(s[0], s[1]);
  _mm512_storeu_ps(denom, _mm512_fmadd_ps(_mm512_loadu_ps(denom), c, sum));
  _mm512_storeu_ps(max, new_max);
  chunk_values<K, kWide>(vr, vrows, a.v_head_dim, probs, true, corr, acc, widened);
}

template <Kind K, int T>
inline void chunk_tile(const Rows& kr, const Rows& vr, const int64_t* krows, const int64_t* vrows,
                       const AttendArgs& a, int64_t c0, const float* const* q, const int64_t* last,
                       float* const* acc, float* max, float* denom, float* probs) {
  chunk_scores<K, T>(kr, krows, a.head_dim, q, probs);
  chunk_softmax_values<K, T>(vr, vrows, a, c0, last, acc, max, denom, probs);
}

template <Kind K, int T>
inline void run_tile(const Rows& kr, const Rows& vr, const int64_t* krows, const int64_t* vrows,
                     const AttendArgs& a, int64_t c0, const float* const* q, const int64_t* last,
                     float* const* acc, float* max, float* denom, float* probs, int64_t n) {
  if constexpr (T > 1) {
    if (n < T)
      return run_tile<K, T - 1>(kr, vr, krows, vrows, a, c0, q, last, acc, max, denom, probs, n);
  }
  chunk_tile<K, T>(kr, vr, krows, vrows, a, c0, q, last, acc, max, denom, probs);
}

// The wide tiles' queries transposed: qt[(g * hd + d) * 16 + l] = q[16 g + l][d] for each
// whole group g of 16 queries (q zero-padded to hd, a multiple of 16).
inline void transpose_groups(const float* const* q, int64_t groups, int64_t hd, float* qt) {
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t d0 = 0; d0 < hd; d0 += kLanes) {
      __m512 r[16];
      DEEPINFER_UNROLL
      for (int l = 0; l < 16; ++l) r[l] = _mm512_loadu_ps(q[g * kWide + l] + d0);
      transpose16(r);
      DEEPINFER_UNROLL
      for (int c = 0; c < 16; ++c) _mm512_storeu_ps(qt + ((g * hd) + d0 + c) * kWide, r[c]);
    }
  }
}

// Rows of the 16 keys of the chunk at c0; keys at or past `end` repeat key c0 (their scores
// are masked and their probabilities are 0).
DEEPINFER_INLINE void span_chunk_rows(const AttendArgs& a, int64_t kv_head, int64_t c0, int64_t end,
                                      int64_t* rows) {
  const int64_t len = min64(kLanes, end - c0);
  key_rows(a, c0, len, kv_head, rows);
  for (int64_t j = len; j < 16; ++j) rows[j] = rows[0];
}

template <Kind K>
void span_kernel(const AttendArgs& a, int64_t kv_head, int64_t begin, int64_t span_end,
                 const float* const* q, const int64_t* last, int64_t n, float* const* acc,
                 float* max, float* denom, float* scratch) {
  const int64_t hd = (a.head_dim + kLanes - 1) / kLanes * kLanes;
  const int64_t groups = n / kWide;
  float* probs = scratch;                   // [kWide][16]
  float* kwide = probs + kWide * kLanes;    // [16][hd] a chunk's K rows widened (wide tiles)
  float* qt = kwide + kLanes * hd;          // [groups][hd][16] (wide tiles)
  float* vwide = qt + groups * hd * kWide;  // [16][vd] a chunk's V rows widened (2+ wide tiles)
  const int64_t vd = (a.v_head_dim + kLanes - 1) / kLanes * kLanes;
  int64_t max_last = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_last = last[i] > max_last ? last[i] : max_last;
    max[i] = -__builtin_inff();
    denom[i] = 0.0f;
    for (int64_t d = 0; d < a.v_head_dim; ++d) acc[i][d] = 0.0f;
  }
  const bool integer = i8_integer_scores(a);
  if (!integer) transpose_groups(q, groups, hd, qt);
  Rows kr(a.k, a.head_dim, a.k_scale, a.group);
  kr.integer_scores = integer;
  const Rows vr(a.v, a.v_row_stride, a.v_scale, a.group);
  // Where V is the leading part of K (MLA), the wide tiles read V from the widened K rows too.
  const bool v_in_k = v_within_k(a);
  const int64_t end = min64(span_end, max_last + 1);
  for (int64_t c0 = begin; c0 < end; c0 += kLanes) {
    int64_t rows[16], next_rows[16];
    span_chunk_rows(a, kv_head, c0, end, rows);
    span_chunk_rows(a, kv_head, c0 + kLanes < end ? c0 + kLanes : c0, end, next_rows);
    // Whole groups of 16 that all read this chunk run as wide tiles, the other queries that
    // read it a tile of up to 8 at a time.
    bool wide[kMaxSpanQueries / kWide];
    int64_t wide_tiles = 0;
    for (int64_t g = 0; g < groups; ++g) {
      wide[g] = true;
      for (int64_t l = 0; l < kWide; ++l) wide[g] = wide[g] && last[g * kWide + l] >= c0;
      wide_tiles += wide[g] ? 1 : 0;
    }
    // The wide tiles read K, and V where it is the leading part of K (MLA), from the chunk's
    // K rows widened once; separate V rows are widened once too where two or more tiles read
    // them (a prefill tile of GQA heads), not once per tile.
    const float* values = v_in_k ? kwide : nullptr;
    // (An int8 cache that scores on integers reads its K rows as stored, V rows apart: only
    // the next chunk's K rows are asked for, as widen_chunk would.)
    if (wide_tiles > 0 && !integer) widen_chunk<K>(kr, rows, next_rows, a.head_dim, hd, kwide);
    if (wide_tiles > 0 && integer) {
      for (int j = 0; j < 16; ++j) prefetch_lines(kr.base + next_rows[j] * kr.stride, a.head_dim);
    }
    if (wide_tiles > 1 && !v_in_k) {
      widen_chunk<K>(vr, rows, next_rows, a.v_head_dim, vd, vwide);
      values = vwide;
    }
    for (int64_t g = 0; g < groups; ++g) {
      if (!wide[g]) continue;
      __m512 scores[kWide];
      if (integer) {  // by query, then transposed to by key
        chunk_scores_i8<kTile>(kr, rows, a.head_dim, q + g * kWide, probs);
        chunk_scores_i8<kTile>(kr, rows, a.head_dim, q + g * kWide + kTile, probs + kTile * kLanes);
        DEEPINFER_UNROLL
        for (int i = 0; i < kWide; ++i) scores[i] = _mm512_loadu_ps(probs + i * kLanes);
        transpose16(scores);
      } else {
        chunk_scores_wide(kwide, hd, qt + g * hd * kWide, scores);
      }
      wide_softmax_values<K>(vr, rows, a, c0, last + g * kWide, acc + g * kWide, max + g * kWide,
                             denom + g * kWide, scores, probs, values);
    }
    const float* tq[kTile];
    int64_t tlast[kTile];
    float* tacc[kTile];
    float tmax[kTile], tden[kTile];
    int64_t tidx[kTile];
    int64_t count = 0;
    auto flush = [&]() {
      run_tile<K, kTile>(kr, vr, rows, rows, a, c0, tq, tlast, tacc, tmax, tden, probs, count);
      for (int64_t i = 0; i < count; ++i) {
        max[tidx[i]] = tmax[i];
        denom[tidx[i]] = tden[i];
      }
      count = 0;
    };
    for (int64_t i = 0; i < n; ++i) {
      if (last[i] < c0 || (i / kWide < groups && wide[i / kWide])) continue;
      tq[count] = q[i];
      tlast[count] = last[i];
      tacc[count] = acc[i];
      tmax[count] = max[i];
      tden[count] = denom[i];
      tidx[count] = i;
      if (++count == kTile) flush();
    }
    if (count > 0) flush();
  }
}

}  // namespace

int64_t stored_query_floats(const AttendArgs& a) {
  return i8_integer_scores(a) ? i8_query_floats(a.head_dim, a.group)
                              : (a.head_dim + kLanes - 1) / kLanes * kLanes;
}

void store_query(const AttendArgs& a, const float* q, float* dst) {
  if (i8_integer_scores(a)) {
    quantize_query_i8(q, a.head_dim, a.group, dst);
    return;
  }
  for (int64_t d0 = 0; d0 < a.head_dim; d0 += kLanes) {
    const int64_t left = a.head_dim - d0;
    const __mmask16 m = left >= kLanes ? static_cast<__mmask16>(0xffff) : first_lanes(left);
    _mm512_storeu_ps(dst + d0, _mm512_maskz_loadu_ps(m, q + d0));
  }
}

void i8_chunk_scores_bw(const I8Rows& k, const int64_t* rows, const I8Query* q, int64_t n,
                        float* scores) {
  i8_chunk_scores_n<DotBw>(k, rows, q, n, scores);
}

int64_t attend_scratch_floats(const AttendArgs& a, int64_t q_heads) {
  return q_heads * (stored_query_floats(a) + a.v_head_dim + 2) + 2 * kTile * kLanes;
}

namespace {

// Every line of the `bytes` bytes at the start of rows[0..15] (row r at base + r * row_bytes).
DEEPINFER_INLINE void prefetch_rows(const char* base, int64_t row_bytes, int64_t bytes,
                                    const int64_t* rows) {
  DEEPINFER_UNROLL
  for (int j = 0; j < 16; ++j) prefetch_lines(base + rows[j] * row_bytes, bytes);
}

// Chunks [c0, c0 + 16) of one kv head's keys up to `pos`: their rows, and the rows of the
// chunks ahead asked for from memory (the kernel reads K one chunk ahead and V on time, so a
// chunk's rows are prefetched two chunks before its V is read).
class ChunkRows {
 public:
  template <Kind K>
  ChunkRows(const AttendArgs& a, int64_t kv_head, int64_t pos, const Rows& kr, const Rows& vr,
            std::integral_constant<Kind, K>)
      : a_(a),
        kv_head_(kv_head),
        end_(pos + 1),
        kr_(kr),
        vr_(vr),
        row_bytes_k_(kr.stride * element_bytes<K>()),
        row_bytes_v_(vr.stride * element_bytes<K>()),
        k_bytes_(a.head_dim * element_bytes<K>()),
        v_bytes_(v_within_k(a) ? 0 : a.v_head_dim * element_bytes<K>()) {
    for (int64_t c = 0; c < kAhead && c * kLanes < end_; ++c) fill(c);
  }
  // The rows of chunk c (c * 16 < end); also asks for chunk c + kAhead's.
  const int64_t* advance(int64_t c) {
    if ((c + kAhead) * kLanes < end_) fill(c + kAhead);
    return ring_[c % kRing];
  }
  const int64_t* rows(int64_t c) const { return ring_[c % kRing]; }

 private:
  static constexpr int64_t kAhead = 2, kRing = kAhead + 1;
  void fill(int64_t c) {
    int64_t* r = ring_[c % kRing];
    span_chunk_rows(a_, kv_head_, c * kLanes, end_, r);
    prefetch_rows(kr_.base, row_bytes_k_, k_bytes_, r);
    if (v_bytes_) prefetch_rows(vr_.base, row_bytes_v_, v_bytes_, r);
  }
  const AttendArgs& a_;
  int64_t kv_head_, end_;
  Rows kr_, vr_;
  int64_t row_bytes_k_, row_bytes_v_, k_bytes_, v_bytes_;
  int64_t ring_[kRing][16];
};

// T query heads (all of a kv head's group) over every chunk of keys, software-pipelined: the
// scores of chunk c + 1 are computed before the softmax and V sums of chunk c, so the two
// chunks' independent work overlaps (one chunk alone is a long dependency chain, scores ->
// max -> exp -> V sums, and more instructions than the core's reorder window).
template <Kind K, int T>
void attend_tile(const AttendArgs& a, const Rows& kr, const Rows& vr, const float* const* q,
                 int64_t pos, int64_t kv_head, float* const* acc, float* max, float* denom,
                 float* probs) {
  int64_t last[T];
  for (int i = 0; i < T; ++i) last[i] = pos;
  ChunkRows chunks(a, kv_head, pos, kr, vr, std::integral_constant<Kind, K>{});
  const int64_t n_chunks = pos / kLanes + 1;
  chunk_scores<K, T>(kr, chunks.rows(0), a.head_dim, q, probs);
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t* rows = chunks.advance(c);
    float* cur = probs + (c & 1) * T * kLanes;
    if (c + 1 < n_chunks)
      chunk_scores<K, T>(kr, chunks.rows(c + 1), a.head_dim, q, probs + ((c + 1) & 1) * T * kLanes);
    chunk_softmax_values<K, T>(vr, rows, a, c * kLanes, last, acc, max, denom, cur);
  }
}

// The per-token kernel (backend.h) on AVX-512: the span kernel's tiles over every chunk of
// keys in order, one running softmax state per head.
template <Kind K>
void attend_kernel(const AttendArgs& a, const float* q_in, int64_t q_heads, int64_t pos,
                   int64_t kv_head, float* out, float* scratch) {
  const int64_t qf = stored_query_floats(a);
  const int64_t dv = a.v_head_dim;
  float* qpad = scratch;                  // [q_heads][qf] queries (store_query)
  float* acc_rows = qpad + q_heads * qf;  // [q_heads][dv] unnormalised V sums
  float* max = acc_rows + q_heads * dv;   // [q_heads]
  float* denom = max + q_heads;           // [q_heads]
  float* probs = denom + q_heads;         // [2][kTile][16] scores of two chunks
  const float* q[kTile];
  float* acc[kTile];
  for (int64_t i = 0; i < q_heads; ++i) {
    store_query(a, q_in + i * a.head_dim, qpad + i * qf);
    for (int64_t d = 0; d < dv; ++d) acc_rows[i * dv + d] = 0.0f;
    max[i] = -__builtin_inff();
    denom[i] = 0.0f;
  }
  Rows kr(a.k, a.head_dim, a.k_scale, a.group);
  kr.integer_scores = i8_integer_scores(a);
  const Rows vr(a.v, a.v_row_stride, a.v_scale, a.group);
  // Tiles of up to kTile heads, each over every chunk (a group above kTile reads the keys
  // once per tile; GQA groups are at most 8 in the supported families).
  for (int64_t h0 = 0; h0 < q_heads; h0 += kTile) {
    const int64_t n = min64(kTile, q_heads - h0);
    for (int64_t i = 0; i < n; ++i) {
      q[i] = qpad + (h0 + i) * qf;
      acc[i] = acc_rows + (h0 + i) * dv;
    }
    with_tile_size<kTile>(n, [&](auto heads) {
      attend_tile<K, decltype(heads)::value>(a, kr, vr, q, pos, kv_head, acc, max + h0, denom + h0,
                                             probs);
    });
  }
  for (int64_t i = 0; i < q_heads; ++i) finish_span(dv, acc_rows + i * dv, denom[i], out + i * dv);
}

}  // namespace

void attend(const AttendArgs& a, const float* q, int64_t q_heads, int64_t pos, int64_t kv_head,
            float* out, float* scratch) {
  switch (a.dtype) {
    case DType::f16:
      return attend_kernel<Kind::f16>(a, q, q_heads, pos, kv_head, out, scratch);
    case DType::bf16:
      return attend_kernel<Kind::bf16>(a, q, q_heads, pos, kv_head, out, scratch);
    case DType::i8:
      return attend_kernel<Kind::i8>(a, q, q_heads, pos, kv_head, out, scratch);
    default:
      return attend_kernel<Kind::f32>(a, q, q_heads, pos, kv_head, out, scratch);
  }
}

int64_t attend_span_scratch_floats(const AttendArgs& a, int64_t n) {
  const int64_t hd = (a.head_dim + kLanes - 1) / kLanes * kLanes;
  const int64_t vd = (a.v_head_dim + kLanes - 1) / kLanes * kLanes;
  return kWide * kLanes + kLanes * hd + n / kWide * hd * kWide + kLanes * vd;
}

void attend_span(const AttendArgs& a, int64_t kv_head, int64_t begin, int64_t end,
                 const float* const* q, const int64_t* last, int64_t n, float* const* acc,
                 float* max, float* denom, float* scratch) {
  switch (a.dtype) {
    case DType::f16:
      return span_kernel<Kind::f16>(a, kv_head, begin, end, q, last, n, acc, max, denom, scratch);
    case DType::bf16:
      return span_kernel<Kind::bf16>(a, kv_head, begin, end, q, last, n, acc, max, denom, scratch);
    case DType::i8:
      return span_kernel<Kind::i8>(a, kv_head, begin, end, q, last, n, acc, max, denom, scratch);
    default:
      return span_kernel<Kind::f32>(a, kv_head, begin, end, q, last, n, acc, max, denom, scratch);
  }
}

void merge_span(int64_t v_dim, float* acc, float* max, float* denom, const float* part_acc,
                float part_max, float part_denom) {
  const float m = maxf(*max, part_max);
  const float wa = exp_scalar(*max - m);
  const float wb = exp_scalar(part_max - m);
  *denom = *denom * wa + part_denom * wb;
  *max = m;
  const __m512 va = _mm512_set1_ps(wa), vb = _mm512_set1_ps(wb);
  for (int64_t d0 = 0; d0 < v_dim; d0 += kLanes) {
    const __mmask16 mk =
        v_dim - d0 >= kLanes ? static_cast<__mmask16>(0xffff) : first_lanes(v_dim - d0);
    const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, acc + d0), va);
    _mm512_mask_storeu_ps(acc + d0, mk,
                          _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, part_acc + d0), vb, x));
  }
}

void finish_span(int64_t v_dim, const float* acc, float denom, float* out) {
  const __m512 dv = _mm512_set1_ps(denom);
  for (int64_t d0 = 0; d0 < v_dim; d0 += kLanes) {
    const __mmask16 mk =
        v_dim - d0 >= kLanes ? static_cast<__mmask16>(0xffff) : first_lanes(v_dim - d0);
    _mm512_mask_storeu_ps(out + d0, mk, _mm512_div_ps(_mm512_maskz_loadu_ps(mk, acc + d0), dv));
  }
}

}  // namespace deepinfer::kernels::detail::avx512
