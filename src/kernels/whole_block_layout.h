#pragma once
// The stored layouts of the whole-block types (kernels.h: q4_0, q5_0, q8_0, q4_k, q5_k) as the
// transposed kernels read them (linear_whole_block_avx2.h, linear_whole_block_avx512.h), and
// the one switch from a run-time dtype to a compile-time one. ggml's block layouts
// (ggml-common.h); no SIMD here.
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace deepinfer::kernels::detail::wb {

// Bytes of a stored block: a 32-element block, or a k-quant super-block of 8 of them.
template <DType W>
constexpr int64_t kStoredBytes = W == DType::q4_0   ? 18
                                 : W == DType::q5_0 ? 22
                                 : W == DType::q8_0 ? 34
                                 : W == DType::q4_k ? 144
                                                    : 176;
template <DType W>
constexpr int kSub = W == DType::q4_k || W == DType::q5_k ? 8 : 1;  // 32-element blocks in it
// The k-quants: a min term per sub-block (kernels.h's second FMA).
template <DType W>
constexpr bool kWithMin = kSub<W> == 8;
// 5-bit quants (q5_0, q5_k: the fifth bit apart from the nibbles).
template <DType W>
constexpr bool kFiveBits = W == DType::q5_0 || W == DType::q5_k;
// Where the 16 nibble bytes (q4_0, q5_0), the 32 int8 quants (q8_0) or the 128 nibble bytes
// (q4_k, q5_k) start.
template <DType W>
constexpr int64_t kQuantsAt = W == DType::q5_0   ? 6
                              : W == DType::q4_k ? 16
                              : W == DType::q5_k ? 48
                                                 : 2;

// q4_0 repacked at load for the AVX2 kernel (pack_weights; linear_whole_block_avx2.h): the rows
// in groups of kRepackRows (the last group zero-padded), a group's blocks in order, each as
// kRepackedQ40Bytes: for o = 0 .. 3, the 32-bit word o (nibble bytes 4o .. 4o + 3) of rows
// 0 .. 7, which is the transposition the kernel otherwise does as it streams the stored rows,
// then the 8 rows' f16 scales. A group takes 8 stored rows' bytes.
constexpr int kRepackRows = 8;
constexpr int64_t kRepackedQ40Bytes = 144;
// w[n, k] q4_0 as stored into that layout: out holds (n + 7) / 8 * 8 stored rows' bytes.
void repack_q4_0_rows8(const uint8_t* w, int64_t n, int64_t k, uint8_t* out);

// fn(std::integral_constant<DType, W>{}) for the whole-block type `dtype` (q8_0 for any other).
template <class Fn>
inline void with_whole_block_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::q4_0:
      return fn(std::integral_constant<DType, DType::q4_0>{});
    case DType::q5_0:
      return fn(std::integral_constant<DType, DType::q5_0>{});
    case DType::q4_k:
      return fn(std::integral_constant<DType, DType::q4_k>{});
    case DType::q5_k:
      return fn(std::integral_constant<DType, DType::q5_k>{});
    default:
      return fn(std::integral_constant<DType, DType::q8_0>{});
  }
}

}  // namespace deepinfer::kernels::detail::wb
