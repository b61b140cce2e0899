#include "kernels/reference.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/quant_blocks.h"

namespace deepinfer::kernels::reference {
namespace {

float weight_at(const void* w, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::f32:
      return static_cast<const float*>(w)[index];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(w)[index]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(w)[index]);
    default:
      fail("reference::linear: unsupported weight dtype ", dtype_name(dtype));
  }
}

// One x block as the block-weight linear sees it (kernels.h).
struct XBlock {
  std::array<int, 32> q{};
  float d = 0.0f;
};

XBlock quantize_block(const float* v) {
  XBlock out;
  float amax = 0.0f;
  bool nan = false;
  for (int e = 0; e < 32; ++e) {
    nan = nan || std::isnan(v[e]);
    amax = std::fabs(v[e]) > amax ? std::fabs(v[e]) : amax;
  }
  out.d = nan ? NAN : amax / 127.0f;
  const float inverse = out.d > 0.0f ? 1.0f / out.d : 0.0f;
  for (int e = 0; e < 32; ++e) {
    const float r = v[e] * inverse;
    out.q[static_cast<size_t>(e)] =
        std::isnan(r) ? 0
                      : static_cast<int>(std::nearbyint(std::fmin(127.0f, std::fmax(-127.0f, r))));
  }
  return out;
}

// One weight block: its integers (q8_0: the int8; q4_0: nibble - 8; q4_1: nibble), d and m.
struct WBlock {
  std::array<int, 32> q{};
  float d = 0.0f;
  float m = 0.0f;
};

float f16_at(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

WBlock weight_block(const uint8_t* p, DType dtype) {
  WBlock out;
  out.d = f16_at(p);
  if (dtype == DType::q8_0) {
    for (int e = 0; e < 32; ++e) out.q[static_cast<size_t>(e)] = static_cast<int8_t>(p[2 + e]);
    return out;
  }
  const bool offset = dtype == DType::q4_1;
  if (offset) out.m = f16_at(p + 2);
  const uint8_t* qs = p + (offset ? 4 : 2);
  for (int e = 0; e < 16; ++e) {
    out.q[static_cast<size_t>(e)] = (qs[e] & 0x0f) - (offset ? 0 : 8);
    out.q[static_cast<size_t>(e + 16)] = (qs[e] >> 4) - (offset ? 0 : 8);
  }
  return out;
}

void linear_blocks(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t n,
                   const float* bias, float* y) {
  const QuantTraits* traits = block_traits(w_dtype);
  DI_CHECK(k % 32 == 0, "reference::linear: k = ", k, " is not a whole number of blocks");
  const int64_t blocks = k / 32;
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<XBlock> xb;
    for (int64_t b = 0; b < blocks; ++b) xb.push_back(quantize_block(x + i * k + b * 32));
    for (int64_t j = 0; j < n; ++j) {
      float acc[16] = {};
      for (int64_t b = 0; b < blocks; ++b) {
        const WBlock wq =
            weight_block(wb + static_cast<size_t>(j * blocks + b) * traits->block_bytes, w_dtype);
        const XBlock& xq = xb[static_cast<size_t>(b)];
        for (int l = 0; l < 8; ++l) {
          int dot = 0, sum = 0;
          for (int e = 4 * l; e < 4 * l + 4; ++e) {
            dot += wq.q[static_cast<size_t>(e)] * xq.q[static_cast<size_t>(e)];
            sum += xq.q[static_cast<size_t>(e)];
          }
          float& a = acc[8 * (b % 2) + l];
          a = std::fma(wq.d * xq.d, static_cast<float>(dot), a);
          if (w_dtype == DType::q4_1) a = std::fma(wq.m, xq.d * static_cast<float>(sum), a);
        }
      }
      float h[8];
      for (int l = 0; l < 8; ++l) h[l] = acc[l] + acc[l + 8];
      const float sum = ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
      y[i * n + j] = bias ? sum + bias[j] : sum;
    }
  }
}

}  // namespace

void linear(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t n,
            const float* bias, float* y) {
  if (is_block_dtype(w_dtype)) return linear_blocks(x, m, k, w, w_dtype, n, bias, y);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) sum += x[i * k + p] * weight_at(w, w_dtype, j * k + p);
      if (bias) sum += bias[j];
      y[i * n + j] = sum;
    }
  }
}

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float sum_sq = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum_sq += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * weight[i];
  }
}

void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos, const float* sin, RopeLayout layout) {
  const int64_t half = rotary_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos[t * half + i];
        const float s = sin[t * half + i];
        const int64_t a = layout == RopeLayout::half_split ? i : 2 * i;
        const int64_t b = layout == RopeLayout::half_split ? i + half : 2 * i + 1;
        const float x0 = v[a];
        const float x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x1 * c + x0 * s;
      }
    }
  }
}

void softmax(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    float max = row[0];
    for (int64_t i = 1; i < cols; ++i) max = std::fmax(max, row[i]);
    float sum = 0.0f;
    for (int64_t i = 0; i < cols; ++i) {
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

void paged_attention(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                     const PagedKv& kv, float scale, float* out) {
  const int64_t group = heads / kv.kv_heads;
  const int64_t v_stride = kv.v_row_stride ? kv.v_row_stride : kv.v_head_dim;
  // Element i of the row starting at element `at` of a K or V store, as f32.
  auto element = [&](const void* store, const float* scales, int64_t at, int64_t i) -> float {
    switch (kv.dtype) {
      case DType::bf16:
        return bf16_to_f32(static_cast<const uint16_t*>(store)[at + i]);
      case DType::f16:
        return f16_to_f32(static_cast<const uint16_t*>(store)[at + i]);
      case DType::i8:
        return scales[(at + i) / kv.quant_group] *
               static_cast<float>(static_cast<const int8_t*>(store)[at + i]);
      default:
        return static_cast<const float*>(store)[at + i];
    }
  };
  std::vector<float> scores;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t len = positions[t] + 1;
    scores.assign(static_cast<size_t>(len), 0.0f);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / group;
      const float* qh = q + (t * heads + h) * kv.head_dim;
      auto slot = [&](int64_t p) {
        const int64_t block = kv.block_table[static_cast<size_t>(p / kv.block_size)];
        return (block * kv.block_size + p % kv.block_size) * kv.kv_heads + kvh;
      };
      float max = -INFINITY;
      for (int64_t p = 0; p < len; ++p) {
        const int64_t at = slot(p) * kv.head_dim;
        float dot = 0.0f;
        for (int64_t d = 0; d < kv.head_dim; ++d) dot += qh[d] * element(kv.k, kv.k_scale, at, d);
        scores[static_cast<size_t>(p)] = dot * scale;
        max = std::fmax(max, dot * scale);
      }
      float sum = 0.0f;
      for (int64_t p = 0; p < len; ++p) {
        scores[static_cast<size_t>(p)] = std::exp(scores[static_cast<size_t>(p)] - max);
        sum += scores[static_cast<size_t>(p)];
      }
      float* oh = out + (t * heads + h) * kv.v_head_dim;
      for (int64_t d = 0; d < kv.v_head_dim; ++d) {
        float acc = 0.0f;
        for (int64_t p = 0; p < len; ++p)
          acc += scores[static_cast<size_t>(p)] * element(kv.v, kv.v_scale, slot(p) * v_stride, d);
        oh[d] = acc / sum;
      }
    }
  }
}

}  // namespace deepinfer::kernels::reference
