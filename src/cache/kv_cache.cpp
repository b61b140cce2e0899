#include "cache/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace deepinfer::cache {

int64_t KvCacheSpec::bytes_per_token() const {
  return num_layers * kv_heads * (head_dim + v_head_dim) * static_cast<int64_t>(sizeof(float));
}

KvCache::KvCache(const KvCacheSpec& spec) : spec_(spec) {
  DI_CHECK(spec.num_layers > 0 && spec.kv_heads > 0 && spec.head_dim > 0 && spec.v_head_dim >= 0,
           "KV cache: layers, kv heads and head_dim must be positive, v_head_dim non-negative "
           "(0 for a K-only cache)");
  DI_CHECK(spec.block_size > 0 && spec.num_blocks > 0,
           "KV cache: block_size and num_blocks must be positive");
  for (int64_t layer = 0; layer < spec.num_layers; ++layer) {
    k_.push_back(Tensor::zeros({spec.num_blocks, spec.block_size, spec.kv_heads, spec.head_dim},
                               DType::f32));
    if (spec.v_head_dim > 0) {
      v_.push_back(Tensor::zeros({spec.num_blocks, spec.block_size, spec.kv_heads, spec.v_head_dim},
                                 DType::f32));
    }
  }
  free_.resize(static_cast<size_t>(spec.num_blocks));
  // Hand out low block ids first.
  for (int64_t i = 0; i < spec.num_blocks; ++i) {
    free_[static_cast<size_t>(i)] = static_cast<int32_t>(spec.num_blocks - 1 - i);
  }
}

int32_t KvCache::allocate_block() {
  DI_CHECK(!free_.empty(), "KV cache is full (", spec_.num_blocks, " blocks of ", spec_.block_size,
           " tokens); raise --max-num-blocks or shorten the request");
  const int32_t block = free_.back();
  free_.pop_back();
  return block;
}

void KvCache::release_block(int32_t block) {
  DI_CHECK(block >= 0 && block < spec_.num_blocks, "release of invalid KV block ", block);
  free_.push_back(block);
}

void KvCache::ensure_capacity(std::vector<int32_t>& block_table, int64_t num_tokens) {
  const int64_t needed = (num_tokens + spec_.block_size - 1) / spec_.block_size;
  DI_CHECK(needed - static_cast<int64_t>(block_table.size()) <= free_blocks(),
           "KV cache is full: ", num_tokens, " tokens need ", needed, " blocks, ", free_blocks(),
           " free of ", spec_.num_blocks, "; raise --max-num-blocks or shorten the request");
  while (static_cast<int64_t>(block_table.size()) < needed) block_table.push_back(allocate_block());
}

void KvCache::release(std::vector<int32_t>& block_table) {
  for (int32_t block : block_table) release_block(block);
  block_table.clear();
}

float* KvCache::slot(const Tensor& storage, int64_t width, std::span<const int32_t> block_table,
                     int32_t position) const {
  const int64_t block_index = position / spec_.block_size;
  DI_CHECK(position >= 0 && block_index < static_cast<int64_t>(block_table.size()), "KV position ",
           position, " is outside the sequence's ", block_table.size(), " blocks");
  const int64_t block = block_table[static_cast<size_t>(block_index)];
  const int64_t row = block * spec_.block_size + position % spec_.block_size;
  return storage.data<float>() + row * spec_.kv_heads * width;
}

void KvCache::write(int64_t layer, std::span<const int32_t> block_table, const int32_t* positions,
                    int64_t tokens, const float* k, const float* v) {
  const int64_t k_row = spec_.kv_heads * spec_.head_dim;
  const int64_t v_row = spec_.kv_heads * spec_.v_head_dim;
  const auto& k_store = k_[static_cast<size_t>(layer)];
  for (int64_t t = 0; t < tokens; ++t) {
    std::memcpy(slot(k_store, spec_.head_dim, block_table, positions[t]), k + t * k_row,
                static_cast<size_t>(k_row) * sizeof(float));
  }
  if (v_row == 0) return;
  const auto& v_store = v_[static_cast<size_t>(layer)];
  for (int64_t t = 0; t < tokens; ++t) {
    std::memcpy(slot(v_store, spec_.v_head_dim, block_table, positions[t]), v + t * v_row,
                static_cast<size_t>(v_row) * sizeof(float));
  }
}

void KvCache::gather_k(int64_t layer, std::span<const int32_t> block_table, int64_t count,
                       float* out) const {
  DI_CHECK(layer >= 0 && layer < spec_.num_layers, "KV cache: layer ", layer, " out of range");
  const int64_t row = spec_.kv_heads * spec_.head_dim;
  const auto& k_store = k_[static_cast<size_t>(layer)];
  for (int64_t p = 0; p < count; ++p) {
    std::memcpy(out + p * row, slot(k_store, spec_.head_dim, block_table, static_cast<int32_t>(p)),
                static_cast<size_t>(row) * sizeof(float));
  }
}

kernels::PagedKv KvCache::view(int64_t layer, std::span<const int32_t> block_table) const {
  kernels::PagedKv kv;
  kv.k = k_[static_cast<size_t>(layer)].data<float>();
  kv.v = v_.empty() ? nullptr : v_[static_cast<size_t>(layer)].data<float>();
  kv.block_size = spec_.block_size;
  kv.kv_heads = spec_.kv_heads;
  kv.head_dim = spec_.head_dim;
  kv.v_head_dim = spec_.v_head_dim;
  kv.block_table = block_table;
  return kv;
}

}  // namespace deepinfer::cache
