#pragma once
// Internal to the attend() backends: the f32 K and V rows of one chunk of keys. A non-f32
// cache (bf16, f16, int8 + scales) is widened chunk by chunk into scratch, once for all the
// query heads that share the kv head, so the attention arithmetic is the f32 code whatever
// the storage. Everything here is `static`: each ISA file gets its own copy (see backend.h).
#include <type_traits>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail {

// dst[0, n) = the f32 values of a cache row of `dtype` (bf16, f16, or i8 times
// scales[i / group], or the i8 values themselves where scales is null); each ISA file defines
// a static inline one (kv_widen_<isa>.h).
using WidenKvRow = void (*)(const void* src, DType dtype, const float* scales, int64_t group,
                            int64_t n, float* dst);

// V rows are the leading part of the K rows (MLA absorbed decode): widen K only.
static inline bool v_within_k(const AttendArgs& a) {
  return a.v == a.k && a.v_row_stride == a.head_dim && a.v_scale == a.k_scale;
}

// An int8 cache scores on integers (attend_i8.h) unless V is the leading part of K.
static inline bool i8_integer_scores(const AttendArgs& a) {
  return a.dtype == DType::i8 && !v_within_k(a);
}

// Scratch floats chunk_rows() needs.
static inline int64_t chunk_rows_scratch_floats(const AttendArgs& a) {
  if (a.dtype == DType::f32) return 0;
  return kAttendChunk * (a.head_dim + (v_within_k(a) ? 0 : a.v_head_dim));
}

static inline int64_t kv_element_bytes(DType dtype) {
  return dtype == DType::f32 ? 4 : dtype == DType::i8 ? 1 : 2;
}

// The cache level the KV rows of a chunk ahead are asked into: L2 (prefetcht1). A chunk's
// rows are 64-128 lines (f32: 16 keys x 2 x 256 B); asked into L1 all at once they filled the
// core's L1 miss buffers and the loop waited on them: decode from DRAM at depth 1024-16384 ran
// 1.4-1.7x slower for an f32 cache, 1.1-1.6x for f16 (attention_bench, session 21).
inline constexpr int kKvPrefetchLocality = 2;  // __builtin_prefetch's: 2 is prefetcht1

// Every 64-byte line of [p, p + n). Always inlined, as is prefetch_chunk_rows: GCC 12's IPA
// pure-const pass takes a function whose only effect is a prefetch for a const one and deletes
// its calls (measured: attend() had no prefetch instruction at all).
static DEEPINFER_INLINE void prefetch_lines(const char* p, int64_t n) {
  const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const auto end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(n);
  for (uintptr_t line = first; line < end; line += 64)
    __builtin_prefetch(reinterpret_cast<const char*>(line), 0, kKvPrefetchLocality);
}

// rows[j] = the cache row (kv_cache_row) of key position c0 + j, j < len (at most
// kAttendChunk): one division per chunk, not two per key (an integer division costs tens of
// cycles: per key they were a large part of a decode chunk's time).
static DEEPINFER_INLINE void key_rows(const AttendArgs& a, int64_t c0, int64_t len, int64_t kv_head,
                                      int64_t* rows) {
  int64_t block = c0 / a.block_size, offset = c0 % a.block_size;
  for (int64_t j = 0; j < len; ++j) {
    rows[j] = kv_cache_row(a.block_table[block] * a.block_size + offset, kv_head, a.kv_heads,
                           a.head_rows);
    if (++offset == a.block_size) {
      offset = 0;
      ++block;
    }
  }
}

// Prefetches the stored K / V rows of key positions [c0, c0 + len) for kv_head: a chunk's rows
// lie a row of every kv head apart, more streams than the hardware prefetchers keep ahead of
// (measured: attend() stalled on their loads), so each chunk asks for the next one's.
static DEEPINFER_INLINE void prefetch_chunk_rows(const AttendArgs& a, int64_t c0, int64_t len,
                                                 int64_t kv_head) {
  const int64_t bytes = kv_element_bytes(a.dtype);
  const bool shared = v_within_k(a);
  int64_t rows[kAttendChunk];
  key_rows(a, c0, len, kv_head, rows);
  for (int64_t j = 0; j < len; ++j) {
    const int64_t row = rows[j];
    prefetch_lines(static_cast<const char*>(a.k) + row * a.head_dim * bytes, a.head_dim * bytes);
    if (shared) continue;
    prefetch_lines(static_cast<const char*>(a.v) + row * a.v_row_stride * bytes,
                   a.v_head_dim * bytes);
  }
}

// Heads per V accumulation tile of attend(): independent FMA chains per V load (one head
// alone waits out the FMA latency on every key).
inline constexpr int kHeadTile = 8;

// tile(std::integral_constant<int, n>) for a run-time n in [1, G]: register tiles are sized at
// compile time.
template <int G, class Tile>
static inline void with_tile_size(int64_t n, const Tile& tile) {
  if constexpr (G > 1) {
    if (n < G) return with_tile_size<G - 1>(n, tile);
  }
  tile(std::integral_constant<int, G>{});
}

// krow[j] / vrow[j] = the K / V rows of key position c0 + j (j < len) for kv_head. An int8
// cache that scores on integers (i8_integer_scores) gets its K rows' integer values (widened
// without scales) and kscale[j] their group scales; V rows are scale * value as for every
// other dtype.
static inline void chunk_rows(const AttendArgs& a, int64_t c0, int64_t len, int64_t kv_head,
                              WidenKvRow widen, float* scratch, const float** krow,
                              const float** vrow, const float** kscale) {
  const bool quantized = a.dtype == DType::i8;
  const bool integer = i8_integer_scores(a);
  const bool shared = v_within_k(a);
  const int64_t bytes = kv_element_bytes(a.dtype);
  float* kbuf = scratch;
  float* vbuf = scratch + kAttendChunk * a.head_dim;
  int64_t rows[kAttendChunk];
  key_rows(a, c0, len, kv_head, rows);
  for (int64_t j = 0; j < len; ++j) {
    const int64_t row = rows[j];
    if (a.dtype == DType::f32) {
      krow[j] = static_cast<const float*>(a.k) + row * a.head_dim;
      vrow[j] = static_cast<const float*>(a.v) + row * a.v_row_stride;
      continue;
    }
    float* k = kbuf + j * a.head_dim;
    const float* k_scales = quantized ? a.k_scale + row * (a.head_dim / a.group) : nullptr;
    widen(static_cast<const char*>(a.k) + row * a.head_dim * bytes, a.dtype,
          integer ? nullptr : k_scales, a.group, a.head_dim, k);
    krow[j] = k;
    if (integer) kscale[j] = k_scales;
    if (shared) {
      vrow[j] = k;
      continue;
    }
    float* v = vbuf + j * a.v_head_dim;
    widen(static_cast<const char*>(a.v) + row * a.v_row_stride * bytes, a.dtype,
          quantized ? a.v_scale + row * (a.v_row_stride / a.group) : nullptr, a.group, a.v_head_dim,
          v);
    vrow[j] = v;
  }
}

}  // namespace deepinfer::kernels::detail
