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
// One tile of `rows` widened keys [rows, dim]: qt [dim, heads_padded] (the query transposed,
// zero in the padding), ws [heads_padded] (w * scale, zero in the padding); scores[rows].
using IndexTileFn = void (*)(const float* keys, int64_t rows, int64_t dim, const float* qt,
                             int64_t heads_padded, const float* ws, float* scores);
namespace scalar {
void index_tile(const float* keys, int64_t rows, int64_t dim, const float* qt, int64_t heads_padded,
                const float* ws, float* scores);
}
namespace avx2 {
void index_tile(const float* keys, int64_t rows, int64_t dim, const float* qt, int64_t heads_padded,
                const float* ws, float* scores);
}
namespace avx512 {
void index_tile(const float* keys, int64_t rows, int64_t dim, const float* qt, int64_t heads_padded,
                const float* ws, float* scores);
}
}  // namespace detail

}  // namespace deepinfer::kernels
