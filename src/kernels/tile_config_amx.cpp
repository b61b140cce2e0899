// The AMX tile configurations of the kernels (palette 1), loaded at every kernel call: a thread
// runs the int8 and the bf16 kernels in turn, and other code in the process (a BLAS library's
// AMX path) may load its own shapes or release the tiles between two of our calls. One LDTILECFG
// per call and thread costs next to nothing beside a GEMM.
#include <cstdint>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

// Palette 1's 64-byte tile configuration (Intel SDM, LDTILECFG).
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

constexpr TileConfig config_of(AmxTiles kind) {
  TileConfig c{};
  c.palette = 1;
  for (int t = 0; t < 8; ++t) {  // C tiles 0 .. 3 and, for bf16, A and B: 16 rows of 64 bytes
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  if (kind == AmxTiles::int8_blocks) {
    for (int t = 4; t < 6; ++t) c.colsb[t] = 32;  // A: 16 x rows of one 32-byte block
    for (int t = 6; t < 8; ++t) c.rows[t] = 8;    // B: 8 rows of 16 weight rows x 4 quants
  }
  if (kind == AmxTiles::one_row)
    for (int t = 0; t < 6; ++t) c.rows[t] = 1;  // C and A: one x row
  return c;
}

constexpr TileConfig kInt8Blocks = config_of(AmxTiles::int8_blocks);
constexpr TileConfig kFull = config_of(AmxTiles::full);
constexpr TileConfig kOneRow = config_of(AmxTiles::one_row);

// Kernel calls per configuration, for tests that must see the tiles run (tile_calls()).
int64_t g_calls[4] = {};

}  // namespace

// LDTILECFG through inline asm naming the whole 64 bytes as its operand: GCC 12's
// _tile_loadconfig names 8, so -O3 dropped the stores that fill in the rest (the crash of
// llama.cpp's AMX build, issue #47).
void configure_tiles(AmxTiles kind) {
  __atomic_fetch_add(&g_calls[static_cast<int>(kind)], 1, __ATOMIC_RELAXED);
  if (kind == AmxTiles::int8_blocks) {
    asm volatile("ldtilecfg %0" : : "m"(kInt8Blocks));
  } else if (kind == AmxTiles::one_row) {
    asm volatile("ldtilecfg %0" : : "m"(kOneRow));
  } else {
    asm volatile("ldtilecfg %0" : : "m"(kFull));
  }
}

int64_t tile_calls(AmxTiles kind) {
  return __atomic_load_n(&g_calls[static_cast<int>(kind)], __ATOMIC_RELAXED);
}

}  // namespace deepinfer::kernels::detail::avx512
