#pragma once
// DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2, GLM-5) as kernels: the score
// of every cached index key for one query token, and the selection of the best k positions.
//   score[j] = sum_h w[h] * relu(scale * q[h] . k_j)
// (transformers' DeepseekV32Indexer: ReLU of the scaled per-head dot products, then the
// weights_proj output weighs and sums the heads). The keys are one row of `dim` per position
// in a paged store (PagedKv with one kv head, any KV cache dtype).
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace deepinfer::kernels {

// q [heads, dim], w [heads]; keys: positions [0, count) through keys.block_table; scores
// [count]. Threads split the positions; each score does not depend on the split or the ISA
// path beyond float reassociation of its head sum (the scalar reference is exact to ~1e-6).
void lightning_index_scores(const float* q, const float* w, int64_t heads, float scale,
                            const PagedKv& keys, int64_t count, float* scores, ThreadPool& pool);

// The k highest of scores[0, count) (k <= count), as positions in ascending order; equal
// scores prefer the lower position, so the choice is deterministic.
void top_k_positions(const float* scores, int64_t count, int64_t k, int32_t* positions);

namespace detail {
// Padded head count of the transposed query: heads rounded up to whole 16-float vectors.
inline int64_t index_heads_padded(int64_t heads) {
  return (heads + 15) / 16 * 16;
}

// The stored row of position p (PagedKv::block_table, one kv head) and, for int8, its scales.
inline int64_t index_row(const PagedKv& keys, int64_t p) {
  const int64_t block = keys.block_table[static_cast<size_t>(p / keys.block_size)];
  return kv_cache_row(block * keys.block_size + p % keys.block_size, 0, 1, keys.head_rows);
}

// One tile: the keys of positions [first, first + rows) widened to f32 into `buffer` (rows x
// keys.head_dim floats), then qt [dim, heads_padded] (the query transposed, zero in the
// padding) and ws [heads_padded] (w * scale, zero in the padding) give scores[rows].
using IndexTileFn = void (*)(const PagedKv& keys, int64_t first, int64_t rows, const float* qt,
                             int64_t heads_padded, const float* ws, float* buffer, float* scores);
#define DEEPINFER_INDEX_TILE                                                         \
  void index_tile(const PagedKv& keys, int64_t first, int64_t rows, const float* qt, \
                  int64_t heads_padded, const float* ws, float* buffer, float* scores);
namespace scalar {
DEEPINFER_INDEX_TILE
}
namespace avx2 {
DEEPINFER_INDEX_TILE
}
namespace avx512 {
DEEPINFER_INDEX_TILE
}
#undef DEEPINFER_INDEX_TILE
}  // namespace detail

}  // namespace deepinfer::kernels
