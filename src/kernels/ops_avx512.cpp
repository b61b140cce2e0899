// AVX-512 element-wise ops and paged attention. Tails use masked loads/stores, so every
// size runs through the same vector code.
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

// Calls body(offset, mask) over [0, n) in whole vectors, then once for the masked tail.
template <typename Body>
inline void for_each_vector(int64_t n, Body body) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) body(i, static_cast<__mmask16>(0xffff));
  if (i < n) body(i, first_lanes(n - i));
}

inline float dot(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for_each_vector(n, [&](int64_t i, __mmask16 m) {
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  });
  return hsum(acc);
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float mean_sq = dot(xr, xr, dim) / static_cast<float>(dim);
    const __m512 inv = _mm512_set1_ps(1.0f / __builtin_sqrtf(mean_sq + eps));
    for_each_vector(dim, [&](int64_t i, __mmask16 m) {
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), inv);
      _mm512_mask_storeu_ps(yr + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i)));
    });
  }
}

void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = residual + r * dim;
    const float* xr = x + r * dim;
    __m512 acc = _mm512_setzero_ps();  // dot(h, h) of rms_norm, vector for vector
    for_each_vector(dim, [&](int64_t i, __mmask16 m) {
      const __m512 h =
          _mm512_add_ps(_mm512_maskz_loadu_ps(m, hr + i), _mm512_maskz_loadu_ps(m, xr + i));
      _mm512_mask_storeu_ps(hr + i, m, h);
      acc = _mm512_fmadd_ps(h, h, acc);
    });
    const float mean_sq = hsum(acc) / static_cast<float>(dim);
    const __m512 inv = _mm512_set1_ps(1.0f / __builtin_sqrtf(mean_sq + eps));
    float* yr = y + r * dim;
    for_each_vector(dim, [&](int64_t i, __mmask16 m) {
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, hr + i), inv);
      _mm512_mask_storeu_ps(yr + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i)));
    });
  }
}

void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos, const float* sin, RopeLayout layout) {
  const int64_t half = rotary_dim / 2;
  // Interleaved: lanes (2i, 2i+1) take angle i; even lanes get -sin (x0 c - x1 s).
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512 even_sign =
      _mm512_castsi512_ps(_mm512_set_epi32(0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN,
                                           0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* ct = cos + t * half;
    const float* st = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      if (layout == RopeLayout::half_split) {
        for_each_vector(half, [&](int64_t i, __mmask16 m) {
          const __m512 x0 = _mm512_maskz_loadu_ps(m, v + i);
          const __m512 x1 = _mm512_maskz_loadu_ps(m, v + half + i);
          const __m512 c = _mm512_maskz_loadu_ps(m, ct + i);
          const __m512 s = _mm512_maskz_loadu_ps(m, st + i);
          _mm512_mask_storeu_ps(v + i, m,
                                _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
          _mm512_mask_storeu_ps(v + half + i, m,
                                _mm512_add_ps(_mm512_mul_ps(x1, c), _mm512_mul_ps(x0, s)));
        });
      } else {
        for (int64_t i = 0; i < half; i += 8) {  // 8 pairs = 16 floats per step
          const int64_t pairs = min64(8, half - i);
          const __mmask8 pm = static_cast<__mmask8>((1u << pairs) - 1u);
          const __mmask16 fm = first_lanes(2 * pairs);
          const __m512 xv = _mm512_maskz_loadu_ps(fm, v + 2 * i);
          const __m512 c =
              _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(pm, ct + i)));
          const __m512 s =
              _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(pm, st + i)));
          const __m512 swapped = _mm512_permute_ps(xv, 0xb1);  // (x1, x0) per pair
          const __m512 out = _mm512_add_ps(_mm512_mul_ps(xv, c),
                                           _mm512_mul_ps(swapped, _mm512_xor_ps(s, even_sign)));
          _mm512_mask_storeu_ps(v + 2 * i, fm, out);
        }
      }
    }
  }
}

void softmax(float* x, int64_t rows, int64_t cols) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    __m512 vmax = neg_inf;
    for_each_vector(cols, [&](int64_t i, __mmask16 m) {
      vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, m, row + i));
    });
    const __m512 max = _mm512_set1_ps(hmax(vmax));
    __m512 sum = _mm512_setzero_ps();
    for_each_vector(cols, [&](int64_t i, __mmask16 m) {
      const __m512 e = exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + i), max));
      _mm512_mask_storeu_ps(row + i, m, e);
      sum = _mm512_mask_add_ps(sum, m, sum, e);
    });
    const __m512 total = _mm512_set1_ps(hsum(sum));
    for_each_vector(cols, [&](int64_t i, __mmask16 m) {
      _mm512_mask_storeu_ps(row + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, row + i), total));
    });
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for_each_vector(n, [&](int64_t i, __mmask16 m) {
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  });
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for_each_vector(n, [&](int64_t i, __mmask16 m) {
    _mm512_mask_storeu_ps(
        out + i, m,
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  });
}

}  // namespace deepinfer::kernels::detail::avx512
