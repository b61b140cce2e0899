// The whole-block types repacked for the AVX2 and AVX-512 kernels (whole_block_layout.h): bytes
// moved (q5_0's fifth bits reordered), no arithmetic, so the kernel sees exactly the vectors it
// would build from the stored rows.
#include <cstring>

#include "core/error.h"
#include "kernels/whole_block_layout.h"

namespace deepinfer::kernels::detail::wb {
namespace {

// q5_0's 32-bit qh (bit e: element e's fifth bit) as the repacked word (bit o + 8c: element
// 4o + c's).
uint32_t fifth_bits_by_lane_byte(const uint8_t* qh) {
  uint32_t in;
  std::memcpy(&in, qh, sizeof(in));
  uint32_t out = 0;
  for (int o = 0; o < 8; ++o)
    for (int c = 0; c < 4; ++c) out |= ((in >> (4 * o + c)) & 1u) << (o + 8 * c);
  return out;
}

// Stored block (or super-block) `src` of row r into the group's repacked block `dst`.
template <DType W>
void repack_block(const uint8_t* src, int r, uint8_t* dst) {
  if constexpr (W == DType::q4_k) {
    std::memcpy(dst + 2 * r, src, 2);           // d
    std::memcpy(dst + 16 + 2 * r, src + 2, 2);  // dmin
    for (int s = 0; s < 3; ++s) std::memcpy(dst + 32 + 32 * s + 4 * r, src + 4 + 4 * s, 4);
    for (int o = 0; o < 32; ++o) std::memcpy(dst + 128 + 32 * o + 4 * r, src + 16 + 4 * o, 4);
  } else {
    constexpr int kWords = W == DType::q8_0 ? 8 : 4;  // of quants (q4_0, q5_0: nibble pairs)
    for (int o = 0; o < kWords; ++o)
      std::memcpy(dst + 32 * o + 4 * r, src + kQuantsAt<W> + 4 * o, 4);
    int64_t at = 32 * kWords;
    if constexpr (W == DType::q5_0) {
      const uint32_t bits = fifth_bits_by_lane_byte(src + 2);
      std::memcpy(dst + at + 4 * r, &bits, 4);
      at += 32;
    }
    std::memcpy(dst + at + 2 * r, src, 2);  // the f16 scale
  }
}

template <DType W>
void repack(const uint8_t* w, int64_t n, int64_t k, int64_t interleave, uint8_t* out) {
  const int64_t blocks = k / 32 / kSub<W>;  // stored blocks per row
  const int64_t groups = (n + kRepackRows - 1) / kRepackRows;
  for (int64_t g = 0; g < groups; ++g) {
    // Block b of group g: block b of its unit, then its place among the unit's groups.
    const int64_t unit = g / interleave, place = g % interleave;
    for (int r = 0; r < kRepackRows && g * kRepackRows + r < n; ++r) {
      const uint8_t* row = w + (g * kRepackRows + r) * blocks * kStoredBytes<W>;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t at = ((unit * blocks + b) * interleave + place) * kRepackedBytes<W>;
        repack_block<W>(row + b * kStoredBytes<W>, r, out + at);
      }
    }
  }
}

}  // namespace

void repack_rows(DType dtype, const uint8_t* w, int64_t n, int64_t k, int64_t interleave,
                 uint8_t* out) {
  DI_CHECK(interleave >= 1, "repack_rows: ", interleave, " groups per unit");
  switch (dtype) {
    case DType::q4_0:
      return repack<DType::q4_0>(w, n, k, interleave, out);
    case DType::q5_0:
      return repack<DType::q5_0>(w, n, k, interleave, out);
    case DType::q8_0:
      return repack<DType::q8_0>(w, n, k, interleave, out);
    case DType::q4_k:
      return repack<DType::q4_k>(w, n, k, interleave, out);
    default:
      fail("repack_rows: ", dtype_name(dtype), " is not repacked");
  }
}

}  // namespace deepinfer::kernels::detail::wb
