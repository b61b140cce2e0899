#include "core/quant_blocks.h"

#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"

// Reference dequantizers for ggml's block layouts (llama.cpp ggml/src/ggml-common.h structs,
// ggml-quants.c dequantize_row_*). Blocks are read byte by byte at their documented offsets,
// so neither the host's endianness nor the (1- or 2-byte) alignment of a block in a mapped file
// matters. Each value is computed with the same float operations in the same order as ggml
// (scale products first, then one multiply and one add/subtract per element), so results are
// bit-identical to ggml's scalar code and to gguf-py as long as the compiler does not contract
// a*b+c into an FMA: this file is built for the baseline ISA, which has none.

namespace deepinfer {
namespace {

constexpr int64_t kQK = 32;     // elements per block of the legacy types (Q4_0 ... Q8_1)
constexpr int64_t kQK_K = 256;  // elements per super-block of the k-quants

inline const uint8_t* bytes_of(const void* src) {
  return static_cast<const uint8_t*>(src);
}

inline uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
inline uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline float load_f16(const uint8_t* p) {
  return f16_to_f32(load_u16(p));
}

void dequantize_f32(const void* src, float* dst, int64_t n) {
  const uint8_t* p = bytes_of(src);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = load_u32(p + 4 * i);
    std::memcpy(dst + i, &bits, sizeof(float));
  }
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const uint8_t* p = bytes_of(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = load_f16(p + 2 * i);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const uint8_t* p = bytes_of(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(p + 2 * i));
}

// block_q4_0 (18 bytes): f16 d, 16 bytes of nibbles. Element j < 16 is the low nibble of byte j,
// element j + 16 its high nibble; x = (q - 8) * d.
void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK; ++b, block += 18, dst += kQK) {
    const float d = load_f16(block);
    const uint8_t* qs = block + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
      dst[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

// block_q4_1 (20 bytes): f16 d, f16 m, 16 bytes of nibbles; x = q * d + m.
void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK; ++b, block += 20, dst += kQK) {
    const float d = load_f16(block);
    const float m = load_f16(block + 2);
    const uint8_t* qs = block + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
      dst[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// block_q5_0 (22 bytes): f16 d, u32 qh (bit i = fifth bit of element i), 16 bytes of nibbles
// laid out as in Q4_0; x = (q - 16) * d.
void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK; ++b, block += 22, dst += kQK) {
    const float d = load_f16(block);
    const uint32_t qh = load_u32(block + 2);
    const uint8_t* qs = block + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>((qs[j] & 0x0f) | (((qh >> j) & 1u) << 4));
      const int hi = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
      dst[j] = static_cast<float>(lo - 16) * d;
      dst[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

// block_q5_1 (24 bytes): f16 d, f16 m, u32 qh, 16 bytes of nibbles; x = q * d + m.
void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK; ++b, block += 24, dst += kQK) {
    const float d = load_f16(block);
    const float m = load_f16(block + 2);
    const uint32_t qh = load_u32(block + 4);
    const uint8_t* qs = block + 8;
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = (qs[j] & 0x0fu) | (((qh >> j) & 1u) << 4);
      const uint32_t hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

// block_q8_0 (34 bytes): f16 d, 32 int8; x = q * d.
void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK; ++b, block += 34, dst += kQK) {
    const float d = load_f16(block);
    for (int j = 0; j < 32; ++j) {
      dst[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
    }
  }
}

// block_q2_K (84 bytes): 16 scale bytes (low nibble: scale, high nibble: min of one 16-element
// group), 64 bytes of 2-bit quants, f16 d, f16 dmin. Each 128-element half uses 32 quant bytes:
// the four 2-bit fields (shift 0, 2, 4, 6) of bytes 0..15 and 16..31 give 8 groups of 16.
void dequantize_q2_k(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, block += 84) {
    const uint8_t* scales = block;
    const uint8_t* q = block + 16;
    const float d = load_f16(block + 80);
    const float dmin = load_f16(block + 82);
    int group = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = scales[group++];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          const uint8_t* qp = q + 16 * part;
          for (int l = 0; l < 16; ++l) {
            *dst++ = dl * static_cast<float>((qp[l] >> shift) & 3) - ml;
          }
        }
      }
    }
  }
}

// The 6-bit signed scale (stored + 32) of 16-element group j of a Q3_K block: the low four bits
// are nibbles of bytes 0..7 (groups 0..7 low nibbles, 8..15 high nibbles), the top two bits sit
// in bytes 8..11, two bits per group.
inline int q3_k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? (scales[j] & 0x0f) : (scales[j - 8] >> 4);
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// block_q3_K (110 bytes): 32 bytes hmask (third bit; bit k of byte l belongs to the k-th group
// pass over elements l and l+16), 64 bytes of low 2-bit quants (as in Q2_K), 12 bytes of packed
// 6-bit scales, f16 d. q = low2 - (high bit set ? 0 : 4); x = d * scale * q.
void dequantize_q3_k(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, block += 110) {
    const uint8_t* hmask = block;
    const uint8_t* q = block + 32;
    const uint8_t* scales = block + 96;
    const float d = load_f16(block + 108);
    int group = 0;
    uint8_t mask = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, mask = static_cast<uint8_t>(mask << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(q3_k_scale(scales, group++));
          const uint8_t* qp = q + 16 * part;
          const uint8_t* hp = hmask + 16 * part;
          for (int l = 0; l < 16; ++l) {
            const int value = ((qp[l] >> shift) & 3) - ((hp[l] & mask) ? 0 : 4);
            *dst++ = dl * static_cast<float>(value);
          }
        }
      }
    }
  }
}

// Scale and min (6 bits each) of 32-element group j of a Q4_K / Q5_K block, packed in 12 bytes:
// groups 0..3 in the low six bits of bytes 0..3 (scales) and 4..7 (mins); groups 4..7 take their
// low four bits from the nibbles of bytes 8..11 and their top two bits from the top bits of
// bytes 0..3 (scales) and 4..7 (mins).
inline void k4_scale_min(const uint8_t* packed, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

// block_q4_K (144 bytes): f16 d, f16 dmin, 12 bytes of scales/mins, 128 bytes of nibbles. Each
// 64 elements use 32 bytes: low nibbles are one group, high nibbles the next;
// x = (d * scale) * q - (dmin * min).
void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, block += 144) {
    const float d = load_f16(block);
    const float dmin = load_f16(block + 2);
    const uint8_t* packed = block + 4;
    const uint8_t* q = block + 16;
    for (int pair = 0; pair < 4; ++pair, q += 32) {
      uint8_t sc, m;
      k4_scale_min(packed, 2 * pair, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      k4_scale_min(packed, 2 * pair + 1, &sc, &m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// block_q5_K (176 bytes): as Q4_K plus 32 bytes qh between the scales and the nibbles; the fifth
// bit of element l of group g is bit g of qh[l].
void dequantize_q5_k(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, block += 176) {
    const float d = load_f16(block);
    const float dmin = load_f16(block + 2);
    const uint8_t* packed = block + 4;
    const uint8_t* qh = block + 16;
    const uint8_t* q = block + 48;
    for (int pair = 0; pair < 4; ++pair, q += 32) {
      uint8_t sc, m;
      k4_scale_min(packed, 2 * pair, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      k4_scale_min(packed, 2 * pair + 1, &sc, &m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = dmin * static_cast<float>(m);
      const int bit1 = 2 * pair;
      const int bit2 = 2 * pair + 1;
      for (int l = 0; l < 32; ++l) {
        const int value = (q[l] & 0x0f) | (((qh[l] >> bit1) & 1) << 4);
        *dst++ = d1 * static_cast<float>(value) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int value = (q[l] >> 4) | (((qh[l] >> bit2) & 1) << 4);
        *dst++ = d2 * static_cast<float>(value) - m2;
      }
    }
  }
}

// block_q6_K (210 bytes): 128 bytes ql (low nibbles), 64 bytes qh (2-bit high parts), 16 int8
// scales (one per 16 elements), f16 d. Each 128-element half uses 64 ql bytes and 32 qh bytes:
// element l + 32k (l < 32, k < 4) takes nibble k/2 of ql[l + 32 (k % 2)] and bits 2k of qh[l];
// x = (d * scale) * (q - 32).
void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  const uint8_t* block = bytes_of(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, block += 210) {
    const uint8_t* ql = block;
    const uint8_t* qh = block + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
    const float d = load_f16(block + 208);
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, scales += 8, dst += 128) {
      for (int l = 0; l < 32; ++l) {
        const int group = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * static_cast<float>(scales[group]) * static_cast<float>(q1);
        dst[l + 32] = d * static_cast<float>(scales[group + 2]) * static_cast<float>(q2);
        dst[l + 64] = d * static_cast<float>(scales[group + 4]) * static_cast<float>(q3);
        dst[l + 96] = d * static_cast<float>(scales[group + 6]) * static_cast<float>(q4);
      }
    }
  }
}

// Q8_1 (f16 d, f16 d * sum(q), 32 int8) and Q8_K (f32 d, 256 int8, 16 int16 group sums) are
// ggml's activation formats for dot products; models are not stored in them, so only their
// sizes are known here.
constexpr QuantTraits kTraits[] = {
    {GgmlType::f32, "F32", 1, 4, dequantize_f32, DType::f32},
    {GgmlType::f16, "F16", 1, 2, dequantize_f16, DType::f16},
    {GgmlType::q4_0, "Q4_0", kQK, 18, dequantize_q4_0, DType::q4_0},
    {GgmlType::q4_1, "Q4_1", kQK, 20, dequantize_q4_1, DType::q4_1},
    {GgmlType::q5_0, "Q5_0", kQK, 22, dequantize_q5_0, DType::q5_0},
    {GgmlType::q5_1, "Q5_1", kQK, 24, dequantize_q5_1, DType::q5_1},
    {GgmlType::q8_0, "Q8_0", kQK, 34, dequantize_q8_0, DType::q8_0},
    {GgmlType::q8_1, "Q8_1", kQK, 36, nullptr, std::nullopt},
    {GgmlType::q2_k, "Q2_K", kQK_K, 84, dequantize_q2_k, std::nullopt},
    {GgmlType::q3_k, "Q3_K", kQK_K, 110, dequantize_q3_k, std::nullopt},
    {GgmlType::q4_k, "Q4_K", kQK_K, 144, dequantize_q4_k, DType::q4_k},
    {GgmlType::q5_k, "Q5_K", kQK_K, 176, dequantize_q5_k, DType::q5_k},
    {GgmlType::q6_k, "Q6_K", kQK_K, 210, dequantize_q6_k, DType::q6_k},
    {GgmlType::q8_k, "Q8_K", kQK_K, 292, nullptr, std::nullopt},
    {GgmlType::bf16, "BF16", 1, 2, dequantize_bf16, DType::bf16},
};

}  // namespace

std::optional<QuantTraits> quant_traits(uint32_t ggml_type) {
  for (const QuantTraits& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == ggml_type) return t;
  }
  return std::nullopt;
}

const QuantTraits& quant_traits(GgmlType type) {
  for (const QuantTraits& t : kTraits) {
    if (t.type == type) return t;
  }
  fail("unknown ggml type ", static_cast<uint32_t>(type));
}

const QuantTraits* block_traits(DType dtype) {
  for (const QuantTraits& t : kTraits) {
    if (t.block_size > 1 && t.dtype == dtype) return &t;
  }
  return nullptr;
}

size_t quant_row_bytes(GgmlType type, int64_t n) {
  const QuantTraits& t = quant_traits(type);
  if (n < 0 || n % t.block_size != 0) {
    fail("a ", t.name, " row of ", n, " elements is not a whole number of ", t.block_size,
         "-element blocks");
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n / t.block_size), t.block_bytes, &bytes)) {
    fail("a ", t.name, " row of ", n, " elements overflows a 64-bit byte count");
  }
  return bytes;
}

}  // namespace deepinfer
