// Portable element-wise ops and attention (the fallback without AVX2). Sums use kLanes
// partial sums and a fixed tree so that compilers can vectorise them with SSE2.
#include <algorithm>
#include <cmath>

#include "kernels/attend_i8.h"
#include "kernels/attend_rows.h"
#include "kernels/backend.h"
#include "kernels/kv_widen_scalar.h"

namespace deepinfer::kernels::detail::scalar {
namespace {

constexpr int kLanes = 8;

float reduce_lanes(const float* a) {
  const float s0 = (a[0] + a[4]) + (a[2] + a[6]);
  const float s1 = (a[1] + a[5]) + (a[3] + a[7]);
  return s0 + s1;
}

float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  const int64_t n_vec = n - n % kLanes;
  for (int64_t i = 0; i < n_vec; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  float sum = reduce_lanes(acc);
  for (int64_t i = n_vec; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, dim) / static_cast<float>(dim) + eps);
    float* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * weight[i];
  }
}

void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = residual + r * dim;
    const float* xr = x + r * dim;
    // dot(h, h) of rms_norm, lane for lane, while h is written.
    float acc[kLanes] = {};
    const int64_t n_vec = dim - dim % kLanes;
    for (int64_t i = 0; i < n_vec; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float h = hr[i + l] + xr[i + l];
        hr[i + l] = h;
        acc[l] += h * h;
      }
    }
    float sum = reduce_lanes(acc);
    for (int64_t i = n_vec; i < dim; ++i) {
      const float h = hr[i] + xr[i];
      hr[i] = h;
      sum += h * h;
    }
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    float* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = hr[i] * inv * weight[i];
  }
}

void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos, const float* sin, RopeLayout layout) {
  const int64_t half = rotary_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* ct = cos + t * half;
    const float* st = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      if (layout == RopeLayout::half_split) {
        float* lo = v;
        float* hi = v + half;
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = lo[i], x1 = hi[i];
          lo[i] = x0 * ct[i] - x1 * st[i];
          hi[i] = x1 * ct[i] + x0 * st[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = v[2 * i], x1 = v[2 * i + 1];
          v[2 * i] = x0 * ct[i] - x1 * st[i];
          v[2 * i + 1] = x1 * ct[i] + x0 * st[i];
        }
      }
    }
  }
}

void softmax(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    float max = row[0];
    for (int64_t i = 1; i < cols; ++i) max = std::max(max, row[i]);
    float acc[kLanes] = {};
    const int64_t n_vec = cols - cols % kLanes;
    for (int64_t i = 0; i < n_vec; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        row[i + l] = std::exp(row[i + l] - max);
        acc[l] += row[i + l];
      }
    }
    float sum = reduce_lanes(acc);
    for (int64_t i = n_vec; i < cols; ++i) {
      row[i] = std::exp(row[i] - max);
      sum += row[i];
    }
    for (int64_t i = 0; i < cols; ++i) row[i] /= sum;
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// Floats of one quantized query of an int8 cache that scores on integers (attend_i8.h), else 0.
static int64_t query_i8_floats(const AttendArgs& a) {
  return i8_integer_scores(a) ? i8_query_floats(a.head_dim, a.group) : 0;
}

int64_t attend_scratch_floats(const AttendArgs& a, int64_t q_heads) {
  return q_heads * (kAttendChunk + a.v_head_dim + 2 + query_i8_floats(a)) +
         chunk_rows_scratch_floats(a);
}

void attend(const AttendArgs& a, const float* q, int64_t q_heads, int64_t pos, int64_t kv_head,
            float* out, float* scratch) {
  float* probs = scratch;                       // [q_heads][kAttendChunk]
  float* acc = probs + q_heads * kAttendChunk;  // [q_heads][v_head_dim] unnormalised
  float* max = acc + q_heads * a.v_head_dim;    // [q_heads] running max score
  float* denom = max + q_heads;                 // [q_heads] running softmax denominator
  float* queries = denom + q_heads;             // [q_heads] quantized queries of an int8 cache
  float* rows = queries + q_heads * query_i8_floats(a);  // widened K/V rows of a non-f32 cache
  std::fill(acc, acc + q_heads * a.v_head_dim, 0.0f);
  std::fill(max, max + q_heads, -INFINITY);
  std::fill(denom, denom + q_heads, 0.0f);
  const bool quantized = i8_integer_scores(a);
  if (quantized) {
    for (int64_t g = 0; g < q_heads; ++g)
      quantize_query_i8(q + g * a.head_dim, a.head_dim, a.group, queries + g * query_i8_floats(a));
  }
  for (int64_t c0 = 0; c0 <= pos; c0 += kAttendChunk) {
    const int64_t len = std::min(kAttendChunk, pos + 1 - c0);
    const float* krow[kAttendChunk];
    const float* vrow[kAttendChunk];
    const float* kscale[kAttendChunk];
    chunk_rows(a, c0, len, kv_head, &widen_kv_row, rows, krow, vrow, kscale);
    for (int64_t g = 0; g < q_heads; ++g) {
      float* p = probs + g * kAttendChunk;
      float chunk_max = -INFINITY;
      const I8Query q8 = i8_query_at(queries + g * query_i8_floats(a), a.head_dim);
      for (int64_t j = 0; j < len; ++j) {
        p[j] = (quantized ? i8_score_widened(q8, krow[j], kscale[j], a.head_dim, a.group)
                          : dot(q + g * a.head_dim, krow[j], a.head_dim)) *
               a.scale;
        chunk_max = std::max(chunk_max, p[j]);
      }
      const float new_max = std::max(max[g], chunk_max);
      const float correction = std::exp(max[g] - new_max);
      float chunk_sum = 0.0f;
      for (int64_t j = 0; j < len; ++j) {
        p[j] = std::exp(p[j] - new_max);
        chunk_sum += p[j];
      }
      denom[g] = denom[g] * correction + chunk_sum;
      max[g] = new_max;
      float* o = acc + g * a.v_head_dim;
      for (int64_t d = 0; d < a.v_head_dim; ++d) o[d] *= correction;
      for (int64_t j = 0; j < len; ++j)
        for (int64_t d = 0; d < a.v_head_dim; ++d) o[d] += p[j] * vrow[j][d];
    }
  }
  for (int64_t g = 0; g < q_heads; ++g)
    for (int64_t d = 0; d < a.v_head_dim; ++d)
      out[g * a.v_head_dim + d] = acc[g * a.v_head_dim + d] / denom[g];
}

}  // namespace deepinfer::kernels::detail::scalar
