#include "kernels/reference.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "kernels/attend_i8.h"
#include "kernels/kv_element.h"

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

// One 32-element weight block as kernels.h defines it: its integers w_int (q8_0: the int8;
// q4_0 / q5_0 / q6_k: quant - 8 / 16 / 32; q4_1, q5_1, q4_k, q5_k: the quant) and, per
// 4-element lane, the weight scale d_w and min term m_w.
struct WBlock {
  std::array<int, 32> q{};
  std::array<float, 8> d{};
  std::array<float, 8> m{};
  bool with_min = false;
};

float f16_at(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// Bit `bit` of the little-endian bit string starting at p.
int bit_at(const uint8_t* p, int bit) {
  return (p[bit / 8] >> (bit % 8)) & 1;
}

// The 6-bit scale (what = 0) or min (what = 1) of sub-block j of a q4_k / q5_k super-block,
// from the 12 packed bytes as ggml's get_scale_min_k4 documents them.
int k4_field(const uint8_t* packed, int j, int what) {
  if (j < 4) return packed[j + 4 * what] & 63;
  const int low = what == 0 ? packed[j + 4] & 0x0f : packed[j + 4] >> 4;
  return low | ((packed[j - 4 + 4 * what] >> 6) << 4);
}

// Block b (elements 32 b .. 32 b + 31) of a weight row.
WBlock weight_block(const uint8_t* row, int64_t b, DType dtype) {
  WBlock out;
  const auto all = [&](float d, float m) {
    out.d.fill(d);
    out.m.fill(m);
  };
  switch (dtype) {
    case DType::q8_0: {
      const uint8_t* p = row + b * 34;
      all(f16_at(p), 0.0f);
      for (int e = 0; e < 32; ++e) out.q[static_cast<size_t>(e)] = static_cast<int8_t>(p[2 + e]);
      return out;
    }
    case DType::q4_0:
    case DType::q4_1: {
      const bool offset = dtype == DType::q4_1;
      const uint8_t* p = row + b * (offset ? 20 : 18);
      all(f16_at(p), offset ? f16_at(p + 2) : 0.0f);
      out.with_min = offset;
      const uint8_t* qs = p + (offset ? 4 : 2);
      for (int e = 0; e < 16; ++e) {
        out.q[static_cast<size_t>(e)] = (qs[e] & 0x0f) - (offset ? 0 : 8);
        out.q[static_cast<size_t>(e + 16)] = (qs[e] >> 4) - (offset ? 0 : 8);
      }
      return out;
    }
    case DType::q5_0:
    case DType::q5_1: {
      const bool with_min = dtype == DType::q5_1;
      const uint8_t* p = row + b * (with_min ? 24 : 22);
      all(f16_at(p), with_min ? f16_at(p + 2) : 0.0f);
      out.with_min = with_min;
      const uint8_t* qh = p + (with_min ? 4 : 2);
      const uint8_t* qs = p + (with_min ? 8 : 6);
      for (int e = 0; e < 32; ++e) {
        const int nibble = e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4;
        out.q[static_cast<size_t>(e)] = (nibble | (bit_at(qh, e) << 4)) - (with_min ? 0 : 16);
      }
      return out;
    }
    case DType::q4_k:
    case DType::q5_k: {
      // Super-block: d, dmin, 12 scale bytes, [q5_k: 32 bytes of fifth bits], 128 nibble bytes;
      // sub-block j is the low (even j) or high (odd j) nibbles of bytes 32 (j / 2) ...
      const bool five = dtype == DType::q5_k;
      const uint8_t* p = row + (b / 8) * (five ? 176 : 144);
      const int j = static_cast<int>(b % 8);
      all(f16_at(p) * static_cast<float>(k4_field(p + 4, j, 0)),
          -(f16_at(p + 2) * static_cast<float>(k4_field(p + 4, j, 1))));
      out.with_min = true;
      const uint8_t* qs = p + (five ? 48 : 16);
      for (int e = 0; e < 32; ++e) {
        const uint8_t byte = qs[32 * (j / 2) + e];
        int value = j % 2 == 0 ? byte & 0x0f : byte >> 4;
        if (five) value |= bit_at(p + 16 + e, j) << 4;  // bit j of qh[e]
        out.q[static_cast<size_t>(e)] = value;
      }
      return out;
    }
    case DType::q6_k: {
      // Element c of the super-block (c = 32 b' + e with b' = b % 8): half h = c / 128, and
      // within it r = c % 128 = 32 quarter + l: low 4 bits from ql[64 h + l + 32 (quarter % 2)]
      // (low nibble for quarter < 2), top 2 bits from bits 2 quarter of qh[32 h + l]; scale
      // index c / 16.
      const uint8_t* p = row + (b / 8) * 210;
      const float d = f16_at(p + 208);
      for (int e = 0; e < 32; ++e) {
        const int c = static_cast<int>(b % 8) * 32 + e;
        const int h = c / 128, quarter = (c % 128) / 32, l = c % 32;
        const uint8_t lowbyte = p[64 * h + l + 32 * (quarter % 2)];
        const int low = quarter < 2 ? lowbyte & 0x0f : lowbyte >> 4;
        const int high = (p[128 + 32 * h + l] >> (2 * quarter)) & 3;
        out.q[static_cast<size_t>(e)] = (low | (high << 4)) - 32;
        if (e % 4 == 0)
          out.d[static_cast<size_t>(e / 4)] =
              d * static_cast<float>(static_cast<int8_t>(p[192 + c / 16]));
      }
      return out;
    }
    default:
      fail("reference::linear: ", dtype_name(dtype), " is not a block type it knows");
  }
}

void linear_blocks(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t n,
                   const float* bias, float* y) {
  const QuantTraits* traits = block_traits(w_dtype);
  DI_CHECK(k % traits->block_size == 0, "reference::linear: k = ", k,
           " is not a whole number of blocks");
  const int64_t blocks = k / 32;
  const size_t row_bytes = dtype_bytes(w_dtype, k);
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<XBlock> xb;
    for (int64_t b = 0; b < blocks; ++b) xb.push_back(quantize_block(x + i * k + b * 32));
    for (int64_t j = 0; j < n; ++j) {
      if (is_whole_block_dtype(w_dtype)) {
        // Whole-block integer dots, one FMA per block in block order (kernels.h).
        float a = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          const WBlock wq = weight_block(wb + static_cast<size_t>(j) * row_bytes, b, w_dtype);
          const XBlock& xq = xb[static_cast<size_t>(b)];
          int dot = 0, sum = 0;
          for (size_t e = 0; e < 32; ++e) {
            dot += wq.q[e] * xq.q[e];
            sum += xq.q[e];
          }
          a = std::fma(wq.d[0] * xq.d, static_cast<float>(dot), a);
          if (wq.with_min) a = std::fma(wq.m[0], xq.d * static_cast<float>(sum), a);
        }
        y[i * n + j] = bias ? a + bias[j] : a;
        continue;
      }
      float acc[16] = {};
      for (int64_t b = 0; b < blocks; ++b) {
        const WBlock wq = weight_block(wb + static_cast<size_t>(j) * row_bytes, b, w_dtype);
        const XBlock& xq = xb[static_cast<size_t>(b)];
        for (int l = 0; l < 8; ++l) {
          int dot = 0, sum = 0;
          for (int e = 4 * l; e < 4 * l + 4; ++e) {
            dot += wq.q[static_cast<size_t>(e)] * xq.q[static_cast<size_t>(e)];
            sum += xq.q[static_cast<size_t>(e)];
          }
          const auto lane = static_cast<size_t>(l);
          float& a = acc[8 * (b % 2) + l];
          a = std::fma(wq.d[lane] * xq.d, static_cast<float>(dot), a);
          if (wq.with_min) a = std::fma(wq.m[lane], xq.d * static_cast<float>(sum), a);
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

void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* y) {
  add(residual, x, residual, rows * dim);
  rms_norm(residual, weight, rows, dim, eps, y);
}

void paged_attention(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                     const PagedKv& kv, float scale, float* out) {
  const int64_t group = heads / kv.kv_heads;
  const int64_t v_stride = kv.v_row_stride ? kv.v_row_stride : kv.v_head_dim;
  auto element = [&](const void* store, const float* scales, int64_t at, int64_t i) {
    return detail::kv_element(kv, store, scales, at, i);
  };
  std::vector<float> scores;
  const bool integer_scores = detail::i8_integer_scores(kv);
  std::vector<float> query_i8(
      integer_scores ? static_cast<size_t>(detail::i8_query_floats(kv.head_dim, kv.quant_group))
                     : 0);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t len = positions[t] + 1;
    scores.assign(static_cast<size_t>(len), 0.0f);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / group;
      const float* qh = q + (t * heads + h) * kv.head_dim;
      auto slot = [&](int64_t p) {
        const int64_t block = kv.block_table[static_cast<size_t>(p / kv.block_size)];
        return kv_cache_row(block * kv.block_size + p % kv.block_size, kvh, kv.kv_heads,
                            kv.head_rows);
      };
      // An int8 cache scores on integers (attend_i8.h), with the query quantized as its rows.
      detail::I8Query q8;
      if (integer_scores)
        q8 = detail::quantize_query_i8(qh, kv.head_dim, kv.quant_group, query_i8.data());
      float max = -INFINITY;
      for (int64_t p = 0; p < len; ++p) {
        const int64_t at = slot(p) * kv.head_dim;
        float dot = 0.0f;
        if (integer_scores) {
          dot = detail::i8_score(q8, static_cast<const int8_t*>(kv.k) + at,
                                 kv.k_scale + at / kv.quant_group, kv.head_dim, kv.quant_group);
        } else {
          for (int64_t d = 0; d < kv.head_dim; ++d) dot += qh[d] * element(kv.k, kv.k_scale, at, d);
        }
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
