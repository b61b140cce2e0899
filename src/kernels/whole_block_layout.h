#pragma once
// The stored layouts of the whole-block types (kernels.h: q4_0, q5_0, q8_0, q4_k, q5_k) as the
// transposed kernels read them (linear_whole_block_avx2.h, linear_whole_block_avx512.h), and
// the one switch from a run-time dtype to a compile-time one. ggml's block layouts
// (ggml-common.h); no SIMD here.
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/isa.h"

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

// Repacked at load for the AVX2 and AVX-512 kernels (pack_weights; linear_whole_block_avx2.h,
// linear_whole_block_avx512.h, which reads two groups per vector): q4_0, q5_0, q8_0 and q4_k.
// The rows in groups of kRepackRows, a group's stored blocks (q4_k: super-blocks) in order, each
// as kRepackedBytes<W> = 8 stored blocks' bytes, so a group takes 8 stored rows' bytes. Groups
// come in units of interleaved_groups(isa) (the last unit zero-padded): AVX2's units are single
// groups, one after another; AVX-512's are pairs interleaved block by block (block b of group
// 2p, then block b of group 2p + 1), the order its vectors read them in, so that a thread's rows
// are one sequential run of bytes. Unit u starts u units' stored rows in. Each repacked block
// holds what the kernel otherwise builds from the stored rows as it streams them, lane r being
// row r:
//  - q4_0, q5_0: for o = 0 .. 3, the 32-bit word o (nibble bytes 4o .. 4o + 3) of the 8 rows
//    (128 B); q5_0 then its fifth bits, lane r's word holding at bit o + 8c the fifth bit of
//    element 4o + c (32 B); then the 8 f16 scales (16 B).
//  - q8_0: for o = 0 .. 7, the 32-bit word o (int8 quants 4o .. 4o + 3) of the 8 rows (256 B);
//    then the 8 f16 scales (16 B).
//  - q4_k: the 8 f16 d, the 8 f16 dmin (16 B each), the three 32-bit words of the 12 scale bytes
//    (3 x 32 B), then for o = 0 .. 31 word o of the 128 nibble bytes (32 x 32 B).
constexpr int kRepackRows = 8;
template <DType W>
constexpr int64_t kRepackedBytes = kRepackRows* kStoredBytes<W>;
constexpr bool has_repacked_layout(DType dtype) {
  return dtype == DType::q4_0 || dtype == DType::q5_0 || dtype == DType::q8_0 ||
         dtype == DType::q4_k;
}
// The ISAs whose kernels read that layout: AVX2 a group per vector, AVX-512 two groups.
constexpr bool reads_repacked_layout(Isa isa) {
  return isa == Isa::avx2 || isa == Isa::avx512;
}
// Groups per unit of the layout under `isa`. Two groups a vector reads a group apart are two
// streams, and the hardware prefetcher followed them (with the kernel's prefetch of the next
// group) at 75 % of a plain read when the machine's bandwidth was high (45 against 60 GB/s on a
// Zen 4, 2 threads), where one interleaved stream kept up with the plain read.
constexpr int64_t interleaved_groups(Isa isa) {
  return isa == Isa::avx512 ? 2 : 1;
}
// w[n, k] of a has_repacked_layout type as stored into that layout, `interleave` groups per unit:
// out holds n rounded up to whole units' stored rows' bytes, zero-filled by the caller (the
// padding rows multiply as 0).
void repack_rows(DType dtype, const uint8_t* w, int64_t n, int64_t k, int64_t interleave,
                 uint8_t* out);

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
