#pragma once
// Paged KV storage for every layer: fixed-size blocks from one pool, addressed through a
// per-sequence block table. A token at logical position p of a sequence lives in block
// block_table[p / block_size], slot p % block_size, in every layer. Layout per layer:
// K [num_blocks, block_size, kv_heads, head_dim], V [num_blocks, block_size, kv_heads, v_head_dim].
// v_head_dim == 0 means a K-only cache: MLA (DeepSeek) keeps one row per token and layer, the
// normalised latent followed by the roped shared key (kv_heads 1, head_dim kv_lora_rank +
// qk_rope_head_dim), and reads the values out of that same row.
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace deepinfer::cache {

struct KvCacheSpec {
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;  // 0: K-only (MLA latent cache)
  int64_t block_size = 16;
  int64_t num_blocks = 0;

  int64_t bytes_per_token() const;  // over all layers, K and V
};

class KvCache {
 public:
  explicit KvCache(const KvCacheSpec& spec);

  const KvCacheSpec& spec() const { return spec_; }

  // Blocks: a plain free list here; reference counts and prefix sharing belong to the
  // engine's block manager, which hands out the same block ids.
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int32_t allocate_block();  // throws Error when the pool is exhausted
  void release_block(int32_t block);
  // Grows `block_table` until it covers `num_tokens` positions.
  void ensure_capacity(std::vector<int32_t>& block_table, int64_t num_tokens);
  void release(std::vector<int32_t>& block_table);

  // Writes the K/V of `tokens` consecutive rows (positions[i]) of one layer into their slots.
  // A K-only cache ignores v (pass nullptr).
  void write(int64_t layer, std::span<const int32_t> block_table, const int32_t* positions,
             int64_t tokens, const float* k, const float* v);
  kernels::PagedKv view(int64_t layer, std::span<const int32_t> block_table) const;
  // Copies the K rows of positions [0, count) of one sequence, in position order, into
  // out [count, kv_heads * head_dim] (MLA expands its latent cache from these).
  void gather_k(int64_t layer, std::span<const int32_t> block_table, int64_t count,
                float* out) const;

 private:
  float* slot(const Tensor& storage, int64_t width, std::span<const int32_t> block_table,
              int32_t position) const;
  KvCacheSpec spec_;
  std::vector<Tensor> k_;  // per layer
  std::vector<Tensor> v_;  // empty for a K-only cache
  std::vector<int32_t> free_;
};

}  // namespace deepinfer::cache
