#pragma once
// Internal to src/kernels: the packed-panel GEMM behind kernels::linear(x, m, PackedWeights).
//
// Layout (pack_weights): the n weight rows are cut into panels of kPanel = 32 rows (the last one
// zero-padded). A panel holds, for every k in order, its 32 weights side by side, so one k step
// of a register tile is two 64-byte loads (f32) from one contiguous stream:
//   f32:  panel P is float[k][32], element (row P*32 + c, col p) at [p][c];
//   bf16: panel P is uint16[ceil(k/2)][32][2], element (row P*32 + c, col p) at
//         [p/2][c][p%2] — a 64-byte load is 16 rows × one pair of k, what vdpbf16ps takes,
//         and `lane << 16` / `lane & 0xffff0000` widen it exactly to the even / odd k.
// The micro-kernels hold y[MR rows, 32·NP columns] in registers and broadcast one x value per
// row per k step (outer products), so every output is ONE chain over k in order:
//   acc = 0; for p in 0..k-1: acc = fma(x[p], w[p], acc);  y = acc (+ bias)
// (bf16 activations: acc = vdpbf16ps(acc, (x[2q], x[2q+1]), (w[2q], w[2q+1])) per pair q).
// Blocking k into chunks stores and reloads acc through y, which does not change that chain,
// so results are bitwise independent of m, of the tile a row falls in and of the thread split.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace deepinfer::kernels::detail {

inline constexpr int64_t kPanel = 32;

// Elements of one packed panel of a [n, k] weight of `dtype` (f32 or bf16). Internal linkage:
// the AVX-512 file's copy must never stand in for the generic one (backend.h).
static inline int64_t packed_panel_elements(int64_t k, DType dtype) {
  return dtype == DType::f32 ? k * kPanel : (k + 1) / 2 * 2 * kPanel;
}

enum class PackedKind {
  f32,        // f32 weights, f32 x
  bf16,       // bf16 weights widened exactly, f32 x
  bf16_dpbf,  // bf16 weights, x rounded to bf16, vdpbf16ps (AVX512_BF16)
};

// Memory for packed panels (64-byte aligned), freed when the last owner goes: on transparent
// huge pages when `huge_pages`, every byte of it (core/huge_page_arena.h: small matrices carved
// from shared regions; 2 MiB pages: a 17 MB expert faults in 9 times instead of 4 300), else
// the heap. Throws Error naming `what` when refused. Baseline code (gemm_packed.cpp).
std::shared_ptr<void> allocate_packed(size_t bytes, bool huge_pages, const char* what);

// One packed linear call as the AVX-512 kernels see it.
struct PackedArgs {
  const float* x = nullptr;      // f32 kinds: [m, x_stride]
  const uint16_t* xb = nullptr;  // bf16_dpbf: x rounded to bf16, [m, x_stride], even stride
  int64_t x_stride = 0;
  int64_t k = 0;
  const void* w = nullptr;  // panels
  PackedKind kind = PackedKind::f32;
  int64_t n = 0;
  const float* bias = nullptr;
  float* y = nullptr;  // [m, n]
};

// Lines of weights that a row tile of the large-m walk brings into L2 while it computes, one per
// k step (prefetch_l2_step): a share of the (panel, k chunk) the walk visits next. Batched decode
// streams every weight once per step and MoE experts do not stay in cache, so without it the first
// row tile over a chunk waited on DRAM while the others computed from L1 (perf, m = 32). L2 and not
// L1: the chunk in use fills L1.
struct L2Lines {
  const char* next = nullptr;
  int64_t lines = 0;
};

// Free functions with internal linkage, not members: an inline member would be one weak
// symbol shared by the AVX2 and AVX-512 files, either copy standing in for both (backend.h).
static inline void prefetch_l2_step(L2Lines& l2) {
  if (l2.lines <= 0) return;
  __builtin_prefetch(l2.next, 0, 2);  // prefetcht1
  l2.next += 64;
  --l2.lines;
}

// Rows of the next of `tiles_left` near-equal row tiles over the `left` rows still to do
// (32 rows in 3 tiles: 11, 11, 10).
static inline int64_t next_tile_rows(int64_t left, int64_t tiles_left) {
  return (left + tiles_left - 1) / tiles_left;
}

// Share t of `tiles` that split these lines.
static inline L2Lines l2_share(const L2Lines& l2, int64_t t, int64_t tiles) {
  const int64_t from = l2.lines * t / tiles, to = l2.lines * (t + 1) / tiles;
  return {l2.next == nullptr ? nullptr : l2.next + from * 64, to - from};
}

// The large-m walk over panels [pa, pb): groups of `group_panels` panels; within a group, k in
// chunks of `chunk_k` (even); within a chunk, the group's panels in order.
struct WalkStep {
  int64_t group, group_end, panel, p0;
};

// s becomes the work after it: the group's next panel at p0, else the group's first panel at
// the next chunk, else the next group's first panel at k = 0; false after the last.
static inline bool next_step(const PackedArgs& a, int64_t chunk_k, int64_t pb, WalkStep& s) {
  const int64_t p1 = s.p0 + chunk_k < a.k ? s.p0 + chunk_k : a.k;
  if (s.panel + 1 < s.group_end) {
    ++s.panel;
    return true;
  }
  if (p1 < a.k) {
    s.panel = s.group;
    s.p0 = p1;
    return true;
  }
  const int64_t group_panels = s.group_end - s.group;
  s.group = s.panel = s.group_end;
  s.group_end = s.group + group_panels < pb ? s.group + group_panels : pb;
  s.p0 = 0;
  return s.group < pb;
}

// The lines of step s's weights (panel s.panel, k chunk from s.p0).
static inline L2Lines step_lines(const PackedArgs& a, bool f32, int64_t chunk_k,
                                 const WalkStep& s) {
  const int64_t element = f32 ? 4 : 2;
  const int64_t panel_bytes = packed_panel_elements(a.k, f32 ? DType::f32 : DType::bf16) * element;
  const int64_t p1 = s.p0 + chunk_k < a.k ? s.p0 + chunk_k : a.k;
  const int64_t end = f32 ? p1 : (p1 + 1) / 2 * 2;  // bf16: whole pairs
  return {static_cast<const char*>(a.w) + s.panel * panel_bytes + s.p0 * kPanel * element,
          (end - s.p0) * kPanel * element / 64};
}

// The lines of the work after (panel, p0); none after the last.
static inline L2Lines next_chunk_lines(const PackedArgs& a, bool f32, int64_t chunk_k,
                                       int64_t group, int64_t group_end, int64_t pb, int64_t panel,
                                       int64_t p0) {
  WalkStep s{group, group_end, panel, p0};
  return next_step(a, chunk_k, pb, s) ? step_lines(a, f32, chunk_k, s) : L2Lines{};
}

// The packed kernel of `kind` under `isa` (avx2 or avx512): bf16_dpbf on AMX tiles where
// amx_active() (gemm_packed_rows_amx), else the ISA's gemm_packed_rows. Baseline code
// (gemm_packed.cpp), shared by the dense linear and the MoE experts.
using PackedRowsFn = void (*)(const PackedArgs&, int64_t, int64_t, int64_t, int64_t);
PackedRowsFn packed_rows(Isa isa, PackedKind kind);
// Rows of slack a bf16_dpbf x needs past its last row (a tile reads 16).
inline constexpr int64_t kPackedXSlackRows = 16;

// y[m0:m1, panels p0:p1] (columns clipped to n); single-threaded. The AVX2 kernels compute
// the same chains (bitwise equal results); they take no bf16_dpbf. panels_per_tile: the
// panels a register tile of `rows` rows spans, so that a caller splitting the panels over
// threads hands out whole tiles (a call of fewer panels falls back to narrower tiles).
namespace avx512 {
void gemm_packed_rows(const PackedArgs& a, int64_t m0, int64_t m1, int64_t p0, int64_t p1);
int64_t panels_per_tile(PackedKind kind, int64_t rows);
// bf16_dpbf on AMX-BF16 tiles (gemm_packed_amx.cpp; needs cpu_has_amx()), any m, one panel at a
// time; a.xb needs 16 readable rows past m1 (never stored).
void gemm_packed_rows_amx(const PackedArgs& a, int64_t m0, int64_t m1, int64_t p0, int64_t p1);
}  // namespace avx512
namespace avx2 {
void gemm_packed_rows(const PackedArgs& a, int64_t m0, int64_t m1, int64_t p0, int64_t p1);
int64_t panels_per_tile(PackedKind kind, int64_t rows);
}  // namespace avx2

}  // namespace deepinfer::kernels::detail
