#include "core/quantize_blocks.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quantize_kquants.h"

// The float operations of ggml's reference quantizers, in their order and precision: the
// scale is one f32 division, its inverse one more, each element one multiply (and one add or
// subtract), then truncation (Q4/Q5) or roundf (Q8_0); scales are stored as f16 rounded to
// nearest even. This file is built with -ffp-contract=off (CMakeLists.txt) so that x * id + 8.5
// is never fused into an FMA, which would round once instead of twice and change a quant.
//
// Two choices where ggml's C and gguf-py's numpy differ only on inputs no checkpoint holds:
// NaN elements become quant 0 (a C cast of NaN is undefined), and the "max" of a Q4_0 / Q5_0
// block is the first element of the largest magnitude, +0.0 for an all-zero block even when it
// holds -0.0 (ggml's loop; gguf-py's argmax would take the -0.0). The goldens avoid both.

namespace deepinfer {
namespace {

constexpr int kQK = 32;

inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void store_f16(uint8_t* p, float v) {
  store_u16(p, f32_to_f16(v));
}

// C's float-to-integer conversion (truncation toward zero) over the range the formulas give
// ([0, 32] up to rounding); NaN gives 0.
inline int truncated(float v) {
  return v > -1.0f && v < 256.0f ? static_cast<int>(v) : 0;
}

// The element of the largest magnitude with its sign (the first one on ties), as ggml's
// Q4_0 / Q5_0: the scale d = max / -8 (or -16) maps it to the most negative quant exactly.
float signed_absmax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// block_q8_0: f16 d = amax / 127, 32 int8 roundf(x / d).
void quantize_q8_0(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(block, d);
  for (int j = 0; j < kQK; ++j) {
    const float q = std::round(x[j] * id);  // half away from zero, as roundf
    block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::isnan(q) ? 0.0f : q));
  }
}

// block_q4_0: f16 d = max / -8, nibbles min(15, trunc(x / d + 8.5)); element j in the low
// nibble of byte j, element j + 16 in its high nibble.
void quantize_q4_0(const float* x, uint8_t* block) {
  const float d = signed_absmax(x) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(block, d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = std::min(15, truncated(x[j] * id + 8.5f));
    const int hi = std::min(15, truncated(x[j + kQK / 2] * id + 8.5f));
    block[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// block_q4_1: f16 d = (max - min) / 15, f16 m = min, nibbles min(15, trunc((x - min) / d + 0.5)).
void quantize_q4_1(const float* x, uint8_t* block) {
  float min, max;
  min_max(x, &min, &max);
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(block, d);
  store_f16(block + 2, min);
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = std::min(15, truncated((x[j] - min) * id + 0.5f));
    const int hi = std::min(15, truncated((x[j + kQK / 2] - min) * id + 0.5f));
    block[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// The low nibbles of 32 five-bit quants (as Q4_0) and their fifth bits (bit i of qh: element i).
void pack_five_bits(const int* q, uint8_t* qh_bytes, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = q[j];
    const int hi = q[j + kQK / 2];
    qs[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
    qh |= static_cast<uint32_t>((lo & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((hi & 0x10) >> 4) << (j + kQK / 2);
  }
  store_u32(qh_bytes, qh);
}

// block_q5_0: f16 d = max / -16, u32 qh, 16 bytes of nibbles; q = min(31, trunc(x / d + 16.5)).
void quantize_q5_0(const float* x, uint8_t* block) {
  const float d = signed_absmax(x) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(block, d);
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = std::min(31, truncated(x[j] * id + 16.5f));
  pack_five_bits(q, block + 2, block + 6);
}

// block_q5_1: f16 d = (max - min) / 31, f16 m = min, u32 qh, 16 bytes of nibbles;
// q = trunc((x - min) / d + 0.5), at most 31 (ggml does not clamp: the largest element gives
// 31 up to rounding, far from 31.5; gguf-py clamps to 31).
void quantize_q5_1(const float* x, uint8_t* block) {
  float min, max;
  min_max(x, &min, &max);
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(block, d);
  store_f16(block + 2, min);
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = std::min(31, truncated((x[j] - min) * id + 0.5f));
  pack_five_bits(q, block + 4, block + 8);
}

struct Quantizer {
  GgmlType type;
  void (*block)(const float* x, uint8_t* block);
};

constexpr Quantizer kQuantizers[] = {
    {GgmlType::q8_0, quantize_q8_0},
    {GgmlType::q4_0, quantize_q4_0},
    {GgmlType::q4_1, quantize_q4_1},
    {GgmlType::q5_0, quantize_q5_0},
    {GgmlType::q5_1, quantize_q5_1},
    {GgmlType::q4_k, kquants::quantize_q4_k_block},  // core/quantize_kquants.cpp
    {GgmlType::q5_k, kquants::quantize_q5_k_block},
    {GgmlType::q6_k, kquants::quantize_q6_k_block},
};

const Quantizer* find(GgmlType type) {
  for (const Quantizer& q : kQuantizers) {
    if (q.type == type) return &q;
  }
  return nullptr;
}

}  // namespace

bool can_quantize(GgmlType type) {
  return find(type) != nullptr;
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  const Quantizer* quantizer = find(type);
  const QuantTraits& traits = quant_traits(type);
  DI_CHECK(quantizer != nullptr, "quantizing to ", traits.name,
           " is not supported (quantizers: ", quantizable_types(), ")");
  quant_row_bytes(type, n);  // throws for a row that is not whole blocks
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t block = traits.block_size;
  for (int64_t b = 0; b < n / block; ++b) {
    quantizer->block(src + b * block, out + static_cast<size_t>(b) * traits.block_bytes);
  }
}

std::string quantizable_types() {
  std::string out;
  for (const Quantizer& q : kQuantizers) {
    if (!out.empty()) out += ", ";
    out += quant_traits(q.type).name;
  }
  return out;
}

}  // namespace deepinfer
