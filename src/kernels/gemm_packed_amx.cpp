// AMX-BF16 tiles for the packed bf16 linear with bf16 activations (PackedKind::bf16_dpbf,
// MatmulPrecision::bf16), every m: TDPBF16PS C[16 x 16] f32 += A[16 rows x 32 bf16] .
// B[16 pairs x 16 columns x 2], k in steps of 32 from 0, then y = C (+ bias).
//
// The operands are the layouts the AVX-512 kernel reads: x rounded to bf16, rows of x_stride
// (a multiple of 32, zero-padded) elements, is A as it stands; a packed panel (gemm_packed.h:
// [ceil(k / 2) pairs][32 rows][2]) is two B tiles as it stands, its columns 0 .. 15 and 16 .. 31
// at 64 bytes apart in rows of 128 bytes. A register block is 32 x rows by one panel: two A
// and two B tiles feed four C tiles, which hold their sums over the whole k.
//
// Numerics: each product of two bf16 is exact in f32, but TDPBF16PS's order and rounding inside
// one step of 32 products are the hardware's (the SDM does not pin them down, and on Sapphire
// Rapids they differ from vdpbf16ps's pair-by-pair chain in the last bits of most outputs). So
// under AMX every m of such a layer runs here, decode included: a row's result depends only on
// its own x and k, never on m, its place in the batch or the thread split, and differs from the
// AVX-512 BF16 result of a CPU without AMX by rounding (kernels.h, MatmulPrecision::bf16).
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"
#include "kernels/gemm_packed.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int kTileRows = 16;
constexpr int64_t kStepK = 32;                     // bf16 elements per A row per step
constexpr int64_t kPairRowBytes = kPanel * 2 * 2;  // one pair of k for the panel's 32 rows

// The last k step's B rows when the panel has fewer than 16 pairs left: zero-padded (the x
// padding is zero, but past the panel lie another panel's weights, or the end).
struct alignas(64) BTail {
  uint16_t pairs[kStepK / 2][kPanel * 2];
};

// The first pass over a panel streams it from memory: a B tile load that misses holds up the
// in-order tile unit, so the panels are prefetched this many k steps ahead (a prefetch past the
// end of the weights does not fault). Decode (m = 1, kernels_bench --gemm, 2 threads) read bf16
// weights at 31-41 GB/s without it, 36-47 with it, against 42-50 for the AVX-512 kernel; 8 or 16
// steps ahead, into L1 or L2, were no better.
constexpr int64_t kAheadSteps = 4;

// C tiles 0 .. 3 of one register block: x rows i0 .. i0 + 15 (A tile 4) and i0 + 16 .. (A tile
// 5, when `two`) by the panel's columns 0 .. 15 (B tile 6) and 16 .. 31 (B tile 7).
void block_products(const PackedArgs& a, const uint8_t* panel, int64_t i0, bool two,
                    const BTail* tail, int64_t full_steps, int64_t steps,
                    const uint8_t* stream_end) {
  const int64_t x_bytes = a.x_stride * 2;
  const auto* x = reinterpret_cast<const uint8_t*>(a.xb + i0 * a.x_stride);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s) {
    const uint8_t* b = s < full_steps ? panel + s * (kStepK / 2) * kPairRowBytes
                                      : reinterpret_cast<const uint8_t*>(tail->pairs);
    // 2 KiB kAheadSteps ahead, into the next panel at the end (they are adjacent), up to the end
    // of the call's panels (stream_end; null on later passes).
    const int64_t ahead_at = (s + kAheadSteps) * (kStepK / 2) * kPairRowBytes;
    if (stream_end != nullptr && ahead_at + 2048 <= stream_end - panel) {
      const uint8_t* ahead = panel + ahead_at;
      DEEPINFER_UNROLL
      for (int l = 0; l < 32; ++l) _mm_prefetch(ahead + l * 64, _MM_HINT_T0);
    }
    _tile_loadd(4, x + s * kStepK * 2, x_bytes);
    _tile_loadd(6, b, kPairRowBytes);
    _tile_loadd(7, b + 64, kPairRowBytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (two) {
      _tile_loadd(5, x + kTileRows * x_bytes + s * kStepK * 2, x_bytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
}

// A stored C tile c (x rows i0 .., columns j0 ..) into y, `rows` x `cols` of it, with the bias.
void store_c(const PackedArgs& a, const float (*c)[16], int64_t i0, int64_t rows, int64_t j0,
             int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  const __mmask16 mask = cols >= 16 ? __mmask16{0xffff} : first_lanes(cols);
  const __m512 bias = a.bias ? _mm512_maskz_loadu_ps(mask, a.bias + j0) : _mm512_setzero_ps();
  for (int64_t r = 0; r < rows && r < kTileRows; ++r) {
    __m512 v = _mm512_load_ps(c[r]);
    if (a.bias) v = _mm512_add_ps(v, bias);
    _mm512_mask_storeu_ps(a.y + (i0 + r) * a.n + j0, mask, v);
  }
}

}  // namespace

void gemm_packed_rows_amx(const PackedArgs& a, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  // One x row (decode): tiles of one row, a sixteenth of the work and of the x loads; each C
  // element is the same function of its row and column whatever the tile's row count (tested).
  configure_tiles(m1 - m0 == 1 ? AmxTiles::one_row : AmxTiles::full);
  const int64_t pairs = (a.k + 1) / 2;  // stored pairs of each panel
  const int64_t steps = (a.k + kStepK - 1) / kStepK;
  const int64_t full_steps = pairs / (kStepK / 2);
  const int64_t panel_bytes = packed_panel_elements(a.k, DType::bf16) * 2;
  BTail tail;
  alignas(64) float c[4][kTileRows][16];
  const auto* end = static_cast<const uint8_t*>(a.w) + p1 * panel_bytes;
  for (int64_t p = p0; p < p1; ++p) {
    const auto* panel = static_cast<const uint8_t*>(a.w) + p * panel_bytes;
    if (full_steps < steps) {  // the last pairs, zero-padded to a whole step
      const int64_t left = pairs - full_steps * (kStepK / 2);
      __builtin_memset(&tail, 0, sizeof(tail));
      __builtin_memcpy(&tail, panel + full_steps * (kStepK / 2) * kPairRowBytes,
                       static_cast<size_t>(left * kPairRowBytes));
    }
    const int64_t j0 = p * kPanel;
    for (int64_t i0 = m0; i0 < m1; i0 += 2 * kTileRows) {
      const bool two = i0 + kTileRows < m1;
      block_products(a, panel, i0, two, &tail, full_steps, steps, i0 == m0 ? end : nullptr);
      const int64_t rows = m1 - i0;
      _tile_stored(0, c[0], 64);
      _tile_stored(1, c[1], 64);
      if (two) {
        _tile_stored(2, c[2], 64);
        _tile_stored(3, c[3], 64);
      }
      store_c(a, c[0], i0, rows, j0, a.n - j0);
      store_c(a, c[1], i0, rows, j0 + 16, a.n - j0 - 16);
      if (two) {
        store_c(a, c[2], i0 + kTileRows, rows - kTileRows, j0, a.n - j0);
        store_c(a, c[3], i0 + kTileRows, rows - kTileRows, j0 + 16, a.n - j0 - 16);
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx512
