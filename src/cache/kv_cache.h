#pragma once
// Paged KV storage for every layer: fixed-size blocks from one pool, addressed through a
// per-sequence block table. A token at logical position p of a sequence lives in block
// block_table[p / block_size], slot p % block_size, in every layer. Layout per layer, head-major
// (kernels::PagedKv::head_rows, so that one kv head's keys are read as one stream):
// K [kv_heads, num_blocks, block_size, head_dim], V [kv_heads, num_blocks, block_size, v_head_dim].
// v_head_dim == 0 means a K-only cache: MLA (DeepSeek) keeps one row per token and layer, the
// normalised latent followed by the roped shared key (kv_heads 1, head_dim kv_lora_rank +
// qk_rope_head_dim), and reads the values out of that same row.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace deepinfer::cache {

// Storage element type of a KV cache: auto (the compute dtype, f32), f32, bf16, f16 or int8
// (symmetric, one f32 scale per quantization group of each token's row). Accepts the usual
// spellings (fp32/float32, bfloat16, fp16/float16). Throws Error naming the accepted values.
DType parse_kv_cache_dtype(std::string_view name);

// Largest int8 group the models' cache specs use (model::kv_quant_group).
inline constexpr int64_t kMaxKvQuantGroup = 32;

struct KvCacheSpec {
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;  // 0: K-only (MLA latent cache)
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  DType dtype = DType::f32;  // f32, bf16, f16 or i8
  // int8 only: elements sharing one scale, a divisor of head_dim and v_head_dim; 0 means
  // gcd(head_dim, v_head_dim) (one scale per head row when they are equal). Models choose
  // theirs in model::kv_quant_group.
  int64_t quant_group = 0;
  // Back each layer's store with its own 2 MiB aligned mapping advised for transparent huge
  // pages (core/memory.h): decode reads the whole context, so fewer TLB misses.
  bool huge_pages = false;
  // DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the lightning indexer's key of every
  // token, one row of index_dim per token in the layers where index_layers is true, in the same
  // blocks and dtype as K (int8: one scale per index_quant_group elements). 0: none.
  int64_t index_dim = 0;
  std::vector<bool> index_layers = {};  // [num_layers] when index_dim > 0
  int64_t index_quant_group = 0;        // 0: gcd(index_dim, kMaxKvQuantGroup)

  int64_t bytes_per_token() const;  // over all layers, K, V and index keys, scales included
  int64_t index_group() const;      // int8 elements per index-key scale
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
  // Copies the K rows of positions [0, count) of one sequence, in position order, as f32 into
  // out [count, kv_heads * head_dim] (MLA expands its latent cache from these).
  void gather_k(int64_t layer, std::span<const int32_t> block_table, int64_t count,
                float* out) const;

  // The indexer keys of a layer with index_layers[layer] (see KvCacheSpec::index_dim): written
  // like K ([tokens, index_dim]) and viewed as a one-head K-only paged store.
  bool has_index(int64_t layer) const;
  void write_index(int64_t layer, std::span<const int32_t> block_table, const int32_t* positions,
                   int64_t tokens, const float* keys);
  kernels::PagedKv index_view(int64_t layer, std::span<const int32_t> block_table) const;

 private:
  // One of K or V for every layer: values [kv_heads, num_blocks, block_size, width] and, for
  // int8, scales [.., width / group].
  struct Store {
    int64_t width = 0;
    int64_t heads = 0;
    int64_t group = 0;           // int8 elements per scale
    std::vector<Tensor> values;  // undefined for a layer without this store
    std::vector<Tensor> scales;
  };
  Store make_store(int64_t width, int64_t heads, int64_t group,
                   const std::vector<bool>& layers = {}) const;
  // Pool slot (block * block_size + offset) of a sequence position; throws outside the table.
  int64_t slot_of(std::span<const int32_t> block_table, int32_t position) const;
  // Rows of one kv head (PagedKv::head_rows).
  int64_t head_rows() const { return spec_.num_blocks * spec_.block_size; }
  void write_rows(const Store& store, int64_t layer, std::span<const int32_t> block_table,
                  const int32_t* positions, int64_t tokens, const float* x);

  KvCacheSpec spec_;
  int64_t group_ = 0;  // elements per int8 scale (resolved quant_group); 0 for other dtypes
  Store k_;
  Store v_;      // no layers for a K-only cache
  Store index_;  // DSA indexer keys (index_dim > 0)
  std::vector<int32_t> free_;
};

}  // namespace deepinfer::cache
