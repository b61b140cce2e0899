// AVX2 element-wise ops and paged attention. Tails use maskload/maskstore, so every size
// runs through the same vector code.
#include "kernels/attend_i8.h"
#include "kernels/attend_rows.h"
#include "kernels/backend.h"
#include "kernels/kv_widen_avx2.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for_each_vector(
      n, [&](int64_t i, auto m) { acc = _mm256_fmadd_ps(load(a + i, m), load(b + i, m), acc); });
  return hsum(acc);
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float mean_sq = dot(xr, xr, dim) / static_cast<float>(dim);
    const __m256 inv = _mm256_set1_ps(1.0f / __builtin_sqrtf(mean_sq + eps));
    for_each_vector(dim, [&](int64_t i, auto m) {
      store(yr + i, _mm256_mul_ps(_mm256_mul_ps(load(xr + i, m), inv), load(weight + i, m)), m);
    });
  }
}

void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = residual + r * dim;
    const float* xr = x + r * dim;
    __m256 acc = _mm256_setzero_ps();  // dot(h, h) of rms_norm, vector for vector
    for_each_vector(dim, [&](int64_t i, auto m) {
      const __m256 h = _mm256_add_ps(load(hr + i, m), load(xr + i, m));
      store(hr + i, h, m);
      acc = _mm256_fmadd_ps(h, h, acc);
    });
    const float mean_sq = hsum(acc) / static_cast<float>(dim);
    const __m256 inv = _mm256_set1_ps(1.0f / __builtin_sqrtf(mean_sq + eps));
    float* yr = y + r * dim;
    for_each_vector(dim, [&](int64_t i, auto m) {
      store(yr + i, _mm256_mul_ps(_mm256_mul_ps(load(hr + i, m), inv), load(weight + i, m)), m);
    });
  }
}

void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos, const float* sin, RopeLayout layout) {
  const int64_t half = rotary_dim / 2;
  // Interleaved: lanes (2i, 2i+1) take angle i; even lanes get -sin (x0 c - x1 s).
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256 even_sign = _mm256_castsi256_ps(
      _mm256_setr_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* ct = cos + t * half;
    const float* st = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      if (layout == RopeLayout::half_split) {
        for_each_vector(half, [&](int64_t i, auto m) {
          const __m256 x0 = load(v + i, m), x1 = load(v + half + i, m);
          const __m256 c = load(ct + i, m), s = load(st + i, m);
          store(v + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)), m);
          store(v + half + i, _mm256_add_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x0, s)), m);
        });
      } else {
        for (int64_t i = 0; i < half; i += 4) {  // 4 pairs = 8 floats per step
          const int64_t pairs = min64(4, half - i);
          const __m256i fm = first_lanes(2 * pairs);
          const __m128i pm = _mm256_castsi256_si128(first_lanes(pairs));
          const __m256 xv = _mm256_maskload_ps(v + 2 * i, fm);
          const __m256 c =
              _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_maskload_ps(ct + i, pm)), dup);
          const __m256 s =
              _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_maskload_ps(st + i, pm)), dup);
          const __m256 swapped = _mm256_permute_ps(xv, 0xb1);  // (x1, x0) per pair
          const __m256 out = _mm256_add_ps(_mm256_mul_ps(xv, c),
                                           _mm256_mul_ps(swapped, _mm256_xor_ps(s, even_sign)));
          _mm256_maskstore_ps(v + 2 * i, fm, out);
        }
      }
    }
  }
}

void softmax(float* x, int64_t rows, int64_t cols) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    __m256 vmax = neg_inf;
    for_each_vector(cols, [&](int64_t i, auto m) {
      vmax = _mm256_max_ps(vmax, keep(load(row + i, m), neg_inf, m));
    });
    const __m256 max = _mm256_set1_ps(hmax(vmax));
    __m256 sum = zero;
    for_each_vector(cols, [&](int64_t i, auto m) {
      const __m256 e = exp(_mm256_sub_ps(load(row + i, m), max));
      store(row + i, e, m);
      sum = _mm256_add_ps(sum, keep(e, zero, m));
    });
    const __m256 total = _mm256_set1_ps(hsum(sum));
    for_each_vector(cols, [&](int64_t i, auto m) {
      store(row + i, _mm256_div_ps(load(row + i, m), total), m);
    });
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for_each_vector(n, [&](int64_t i, auto m) {
    const __m256 g = load(gate + i, m);
    const __m256 e = exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    store(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), load(up + i, m)), m);
  });
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for_each_vector(n, [&](int64_t i, auto m) {
    store(out + i, _mm256_add_ps(load(a + i, m), load(b + i, m)), m);
  });
}

// An int8 cache's queries by blocks of 8 heads of a token (block_scores_i8): the quantized
// values [head_dim][8] and group scales [head_dim / group][8], the heads along the lanes.
static int64_t query_block_floats(const AttendArgs& a) {
  return 8 * (a.head_dim + a.head_dim / a.group);
}

// Floats of an int8 cache's query blocks for `tokens` tokens of q_heads heads, plus one
// quantized query (attend_i8.h) to transpose from; 0 unless the cache scores on integers.
static int64_t query_blocks_floats(const AttendArgs& a, int64_t tokens, int64_t q_heads) {
  if (!i8_integer_scores(a)) return 0;
  return tokens * ((q_heads + 7) / 8) * query_block_floats(a) +
         i8_query_floats(a.head_dim, a.group);
}

int64_t attend_tokens_scratch_floats(const AttendArgs& a, int64_t tokens, int64_t q_heads) {
  return tokens * q_heads * (kAttendChunk + a.v_head_dim + 3) +
         query_blocks_floats(a, tokens, q_heads) + chunk_rows_scratch_floats(a);
}

int64_t attend_scratch_floats(const AttendArgs& a, int64_t q_heads) {
  return attend_tokens_scratch_floats(a, 1, q_heads);
}

namespace {

// acc[g] = acc[g] * corr[g] + sum_j p[g][j] * v_j for G heads at once: each V vector is loaded
// once for all G heads; per head the operations and their order are those of G = 1.
template <int G>
inline void accumulate_v(const AttendArgs& a, const float* const* vrow, int64_t len,
                         const float* probs, const float* corr, float* acc) {
  for_each_vector(a.v_head_dim, [&](int64_t d, auto m) {
    __m256 o[G];
    DEEPINFER_UNROLL
    for (int g = 0; g < G; ++g)
      o[g] = _mm256_mul_ps(load(acc + g * a.v_head_dim + d, m), _mm256_set1_ps(corr[g]));
    for (int64_t j = 0; j < len; ++j) {
      const __m256 v = load(vrow[j] + d, m);
      DEEPINFER_UNROLL
      for (int g = 0; g < G; ++g)
        o[g] = _mm256_fmadd_ps(_mm256_set1_ps(probs[g * kAttendChunk + j]), v, o[g]);
    }
    DEEPINFER_UNROLL
    for (int g = 0; g < G; ++g) store(acc + g * a.v_head_dim + d, o[g], m);
  });
}

// dot(q, k_j) for 8 keys of a chunk as one vector, bit for bit what dot() gives for each
// (hsum8 == hsum per vector); keys j >= len repeat key 0 and are dropped by the caller.
inline __m256 chunk_dots(const float* q, const float* const* krow, int64_t len, int64_t head_dim) {
  const float* kr[kLanes];
  __m256 acc[kLanes];
  DEEPINFER_UNROLL
  for (int j = 0; j < kLanes; ++j) {
    kr[j] = krow[j < len ? j : 0];
    acc[j] = _mm256_setzero_ps();
  }
  for_each_vector(head_dim, [&](int64_t d, auto m) {
    const __m256 qv = load(q + d, m);
    DEEPINFER_UNROLL
    for (int j = 0; j < kLanes; ++j) acc[j] = _mm256_fmadd_ps(qv, load(kr[j] + d, m), acc[j]);
  });
  return hsum8(acc);
}

// The int8 scores (attend_i8.h) of a block of up to 8 heads (qt[d * 8 + i] = head i's quantized
// value d, sq[g * 8 + i] its group scales; 0 past the block's heads) against the chunk's keys,
// with the heads along the lanes: lane i of out[j] is head i's score of key j (keys j >= len
// repeat key 0). Per key and element one broadcast and one FMA, no horizontal sums; the sums
// of integer products are exact in f32 in any order, so these are the bits of i8_score.
inline void block_scores_i8(const float* qt, const float* sq, const float* const* krow,
                            const float* const* kscale, int64_t len, int64_t head_dim,
                            int64_t group, __m256* out) {
  for (int64_t j0 = 0; j0 < kAttendChunk; j0 += kLanes) {
    if (j0 >= len) {  // all masked
      for (int jj = 0; jj < kLanes; ++jj) out[j0 + jj] = _mm256_setzero_ps();
      continue;
    }
    const float* kr[kLanes];
    const float* ks[kLanes];
    __m256 score[kLanes];
    DEEPINFER_UNROLL
    for (int jj = 0; jj < kLanes; ++jj) {
      const int64_t j = j0 + jj < len ? j0 + jj : 0;
      kr[jj] = krow[j];
      ks[jj] = kscale[j];
      score[jj] = _mm256_setzero_ps();
    }
    for (int64_t g0 = 0, g = 0; g0 < head_dim; g0 += group, ++g) {
      __m256 acc[kLanes];
      DEEPINFER_UNROLL
      for (int jj = 0; jj < kLanes; ++jj) acc[jj] = _mm256_setzero_ps();
      for (int64_t d = g0; d < g0 + group; ++d) {
        const __m256 qv = _mm256_loadu_ps(qt + d * kLanes);
        DEEPINFER_UNROLL
        for (int jj = 0; jj < kLanes; ++jj)
          acc[jj] = _mm256_fmadd_ps(_mm256_broadcast_ss(kr[jj] + d), qv, acc[jj]);
      }
      const __m256 sqv = _mm256_loadu_ps(sq + g * kLanes);
      DEEPINFER_UNROLL
      for (int jj = 0; jj < kLanes; ++jj)
        score[jj] = _mm256_fmadd_ps(acc[jj], _mm256_mul_ps(sqv, _mm256_broadcast_ss(ks[jj] + g)),
                                    score[jj]);
    }
    DEEPINFER_UNROLL
    for (int jj = 0; jj < kLanes; ++jj) out[j0 + jj] = score[jj];
  }
}

}  // namespace

void attend_tokens(const AttendArgs& a, const float* q, int64_t q_stride, int64_t tokens,
                   int64_t q_heads, const int64_t* pos, int64_t kv_head, float* out,
                   int64_t out_stride, float* scratch) {
  static_assert(kAttendChunk == 2 * kLanes, "two vectors of scores per chunk");
  const int64_t states = tokens * q_heads;     // state g: token g / q_heads, head g % q_heads
  float* probs = scratch;                      // [states][kAttendChunk]
  float* acc = probs + states * kAttendChunk;  // [states][v_head_dim] unnormalised
  float* max = acc + states * a.v_head_dim;    // [states] running max score
  float* denom = max + states;                 // [states] running softmax denominator
  float* corr = denom + states;                // [states] this chunk's rescaling
  float* blocks = corr + states;               // an int8 cache's query blocks [tokens][heads / 8]
  float* rows = blocks + query_blocks_floats(a, tokens, q_heads);  // widened K/V rows
  const bool quantized = i8_integer_scores(a);
  const int64_t n_blocks = (q_heads + kLanes - 1) / kLanes;
  const int64_t block_floats = quantized ? query_block_floats(a) : 0;
  if (quantized) {
    float* one = blocks + tokens * n_blocks * block_floats;  // one quantized query
    for (int64_t i = 0; i < tokens * n_blocks * block_floats; ++i) blocks[i] = 0.0f;
    for (int64_t g = 0; g < states; ++g) {
      const int64_t t = g / q_heads, h = g % q_heads;
      const I8Query q8 =
          quantize_query_i8(q + t * q_stride + h * a.head_dim, a.head_dim, a.group, one);
      float* block = blocks + (t * n_blocks + h / kLanes) * block_floats;
      for (int64_t d = 0; d < a.head_dim; ++d) block[d * kLanes + h % kLanes] = q8.values[d];
      for (int64_t s = 0; s < a.head_dim / a.group; ++s)
        block[(a.head_dim + s) * kLanes + h % kLanes] = q8.scales[s];
    }
  }
  for_each_vector(states * a.v_head_dim,
                  [&](int64_t d, auto m) { store(acc + d, _mm256_setzero_ps(), m); });
  int64_t last = 0;
  for (int64_t t = 0; t < tokens; ++t) last = pos[t] > last ? pos[t] : last;
  for (int64_t g = 0; g < states; ++g) {
    max[g] = -__builtin_inff();
    denom[g] = 0.0f;
  }
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  const __m256 scale = _mm256_set1_ps(a.scale);
  for (int64_t c0 = 0; c0 <= last; c0 += kAttendChunk) {
    const float* krow[kAttendChunk];
    const float* vrow[kAttendChunk];
    const float* kscale[kAttendChunk];
    const int64_t keys = min64(kAttendChunk, last + 1 - c0);
    chunk_rows(a, c0, keys, kv_head, &widen_kv_row, rows, krow, vrow, kscale);
    if (c0 + kAttendChunk <= last)
      prefetch_chunk_rows(a, c0 + kAttendChunk, min64(kAttendChunk, last + 1 - c0 - kAttendChunk),
                          kv_head);
    // Each token's heads over the chunk's keys up to its own position: per head the
    // operations of a call with that token alone.
    for (int64_t t = 0; t < tokens; ++t) {
      if (pos[t] < c0) continue;
      const int64_t len = min64(kAttendChunk, pos[t] + 1 - c0);
      // All heads' scores first, then their softmax steps: each head's softmax is a long
      // dependency chain (max, exps, sums), and with the scores done the chains of the heads
      // overlap. The operations per head are unchanged.
      if (quantized) {
        for (int64_t b = 0; b < n_blocks; ++b) {  // int8: 8 heads at a time
          const float* block = blocks + (t * n_blocks + b) * block_floats;
          __m256 by_key[kAttendChunk];
          block_scores_i8(block, block + a.head_dim * kLanes, krow, kscale, len, a.head_dim,
                          a.group, by_key);
          alignas(32) float scores[kAttendChunk][kLanes];
          for (int64_t j = 0; j < kAttendChunk; ++j)
            _mm256_store_ps(scores[j], _mm256_mul_ps(by_key[j], scale));
          for (int64_t i = 0; i < min64(kLanes, q_heads - b * kLanes); ++i) {
            float* p = probs + (t * q_heads + b * kLanes + i) * kAttendChunk;
            for (int64_t j = 0; j < kAttendChunk; ++j)
              p[j] = j < len ? scores[j][i] : -__builtin_inff();
          }
        }
      } else {
        const __m256i valid0 = first_lanes(len), valid1 = first_lanes(len - kLanes);
        for (int64_t g = t * q_heads; g < (t + 1) * q_heads; ++g) {
          float* p = probs + g * kAttendChunk;
          const float* qg = q + t * q_stride + (g - t * q_heads) * a.head_dim;
          _mm256_storeu_ps(p, keep(_mm256_mul_ps(chunk_dots(qg, krow, len, a.head_dim), scale),
                                   neg_inf, valid0));
          _mm256_storeu_ps(
              p + kLanes,
              len > kLanes
                  ? keep(_mm256_mul_ps(chunk_dots(qg, krow + kLanes, len - kLanes, a.head_dim),
                                       scale),
                         neg_inf, valid1)
                  : neg_inf);
        }
      }
      for (int64_t h0 = t * q_heads; h0 < (t + 1) * q_heads; h0 += kLanes) {
        const int64_t n = min64(kLanes, (t + 1) * q_heads - h0);
        alignas(32) float new_max[kLanes] = {};
        for (int64_t i = 0; i < n; ++i) {
          const float* p = probs + (h0 + i) * kAttendChunk;
          new_max[i] = maxf(max[h0 + i],
                            hmax(_mm256_max_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + kLanes))));
        }
        // e^(old max - new max) of up to 8 heads in one vector exp (lane for lane what a scalar
        // exp of the same argument gives).
        const __m256i heads = first_lanes(n);
        _mm256_maskstore_ps(
            corr + h0, heads,
            exp(_mm256_sub_ps(_mm256_maskload_ps(max + h0, heads), _mm256_load_ps(new_max))));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t g = h0 + i;
          float* p = probs + g * kAttendChunk;
          const __m256 shift = _mm256_set1_ps(new_max[i]);
          const __m256 p0 = exp(_mm256_sub_ps(_mm256_loadu_ps(p), shift));
          const __m256 p1 = exp(_mm256_sub_ps(_mm256_loadu_ps(p + kLanes), shift));
          _mm256_storeu_ps(p, p0);  // -inf lanes became 0
          _mm256_storeu_ps(p + kLanes, p1);
          denom[g] = denom[g] * corr[g] + hsum(_mm256_add_ps(p0, p1));
          max[g] = new_max[i];
        }
      }
      for (int64_t h = 0; h < q_heads; h += kHeadTile) {
        const int64_t g = t * q_heads + h;
        with_tile_size<kHeadTile>(min64(kHeadTile, q_heads - h), [&](auto heads) {
          accumulate_v<decltype(heads)::value>(a, vrow, len, probs + g * kAttendChunk, corr + g,
                                               acc + g * a.v_head_dim);
        });
      }
    }
  }
  for (int64_t g = 0; g < states; ++g) {
    const __m256 dv = _mm256_set1_ps(denom[g]);
    float* o = out + g / q_heads * out_stride + g % q_heads * a.v_head_dim;
    for_each_vector(a.v_head_dim, [&](int64_t d, auto m) {
      store(o + d, _mm256_div_ps(load(acc + g * a.v_head_dim + d, m), dv), m);
    });
  }
}

void attend(const AttendArgs& a, const float* q, int64_t q_heads, int64_t pos, int64_t kv_head,
            float* out, float* scratch) {
  attend_tokens(a, q, 0, 1, q_heads, &pos, kv_head, out, 0, scratch);
}

}  // namespace deepinfer::kernels::detail::avx2
