// q4_0 repacked for the AVX2 whole-block kernel (whole_block_layout.h): bytes moved, no
// arithmetic, so the kernel sees exactly the vectors it would build from the stored rows.
#include <cstring>

#include "kernels/whole_block_layout.h"

namespace deepinfer::kernels::detail::wb {

void repack_q4_0_rows8(const uint8_t* w, int64_t n, int64_t k, uint8_t* out) {
  constexpr int64_t stored = kStoredBytes<DType::q4_0>;
  const int64_t blocks = k / 32;
  const int64_t groups = (n + kRepackRows - 1) / kRepackRows;
  std::memset(out, 0, static_cast<size_t>(groups * kRepackRows * blocks * stored));
  for (int64_t g = 0; g < groups; ++g) {
    for (int r = 0; r < kRepackRows && g * kRepackRows + r < n; ++r) {
      const uint8_t* row = w + (g * kRepackRows + r) * blocks * stored;
      for (int64_t b = 0; b < blocks; ++b) {
        uint8_t* dst = out + (g * blocks + b) * kRepackedQ40Bytes;
        const uint8_t* src = row + b * stored;
        for (int o = 0; o < 4; ++o) std::memcpy(dst + 32 * o + 4 * r, src + 2 + 4 * o, 4);
        std::memcpy(dst + 128 + 2 * r, src, 2);  // the f16 scale
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::wb
