#include "cache/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "cache/kv_quant.h"

#include "core/error.h"

namespace deepinfer::cache {

DType parse_kv_cache_dtype(std::string_view name) {
  if (name == "auto" || name == "f32" || name == "fp32" || name == "float32") return DType::f32;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "f16" || name == "fp16" || name == "float16" || name == "half") return DType::f16;
  if (name == "int8" || name == "i8") return DType::i8;
  throw Error(
      str_cat("unknown KV cache dtype '", name,
              "': expected auto, f32, bf16, f16 or int8 (auto keeps the compute dtype, f32)"));
}

namespace {

int64_t resolved_group(const KvCacheSpec& spec) {
  if (spec.dtype != DType::i8) return 0;
  if (spec.quant_group > 0) return spec.quant_group;
  return std::gcd(spec.head_dim, spec.v_head_dim > 0 ? spec.v_head_dim : spec.head_dim);
}

}  // namespace

int64_t KvCacheSpec::bytes_per_token() const {
  DI_CHECK(head_dim > 0 && v_head_dim >= 0 && quant_group >= 0,
           "KV cache: head_dim must be positive, v_head_dim and quant_group non-negative");
  const int64_t elements = kv_heads * (head_dim + v_head_dim);
  int64_t bytes = elements * static_cast<int64_t>(dtype_size(dtype));
  if (dtype == DType::i8)
    bytes += elements / resolved_group(*this) * static_cast<int64_t>(sizeof(float));
  bytes *= num_layers;
  if (index_dim > 0) {
    int64_t index_bytes = index_dim * static_cast<int64_t>(dtype_size(dtype));
    if (dtype == DType::i8)
      index_bytes += index_dim / index_group() * static_cast<int64_t>(sizeof(float));
    bytes += index_bytes * std::count(index_layers.begin(), index_layers.end(), true);
  }
  return bytes;
}

int64_t KvCacheSpec::index_group() const {
  if (index_quant_group > 0) return index_quant_group;
  return std::gcd(index_dim, kMaxKvQuantGroup);
}

KvCache::KvCache(const KvCacheSpec& spec) : spec_(spec), group_(resolved_group(spec)) {
  DI_CHECK(spec.num_layers > 0 && spec.kv_heads > 0 && spec.head_dim > 0 && spec.v_head_dim >= 0,
           "KV cache: layers, kv heads and head_dim must be positive, v_head_dim non-negative "
           "(0 for a K-only cache)");
  DI_CHECK(spec.block_size > 0 && spec.num_blocks > 0,
           "KV cache: block_size and num_blocks must be positive");
  DI_CHECK(spec.dtype == DType::f32 || spec.dtype == DType::bf16 || spec.dtype == DType::f16 ||
               spec.dtype == DType::i8,
           "KV cache: dtype ", dtype_name(spec.dtype), " is not supported (f32, bf16, f16, int8)");
  DI_CHECK(
      spec.dtype != DType::i8 || (spec.head_dim % group_ == 0 && spec.v_head_dim % group_ == 0),
      "KV cache: quant_group ", group_, " must divide head_dim ", spec.head_dim, " and v_head_dim ",
      spec.v_head_dim);
  DI_CHECK(
      spec.index_dim == 0 || (spec.index_dim > 0 &&
                              static_cast<int64_t>(spec.index_layers.size()) == spec.num_layers &&
                              spec.index_dim % spec.index_group() == 0),
      "KV cache: index_dim ", spec.index_dim, " needs one index_layers flag per layer (",
      spec.index_layers.size(), " for ", spec.num_layers, ") and a dividing quant group");
  k_ = make_store(spec.head_dim, spec.kv_heads, group_);
  if (spec.v_head_dim > 0) v_ = make_store(spec.v_head_dim, spec.kv_heads, group_);
  if (spec.index_dim > 0)
    index_ = make_store(spec.index_dim, 1, spec.index_group(), spec.index_layers);
  free_.resize(static_cast<size_t>(spec.num_blocks));
  // Hand out low block ids first.
  for (int64_t i = 0; i < spec.num_blocks; ++i) {
    free_[static_cast<size_t>(i)] = static_cast<int32_t>(spec.num_blocks - 1 - i);
  }
}

KvCache::Store KvCache::make_store(int64_t width, int64_t heads, int64_t group,
                                   const std::vector<bool>& layers) const {
  Store store;
  store.width = width;
  store.heads = heads;
  store.group = group;
  store.values.resize(static_cast<size_t>(spec_.num_layers));
  store.scales.resize(spec_.dtype == DType::i8 ? store.values.size() : 0);
  for (int64_t layer = 0; layer < spec_.num_layers; ++layer) {
    const auto l = static_cast<size_t>(layer);
    if (!layers.empty() && !layers[l]) continue;
    store.values[l] = Tensor::zeros({heads, spec_.num_blocks, spec_.block_size, width}, spec_.dtype,
                                    spec_.huge_pages);
    if (spec_.dtype == DType::i8) {
      store.scales[l] =
          Tensor::zeros({heads, spec_.num_blocks, spec_.block_size, width / group}, DType::f32);
    }
  }
  return store;
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

int64_t KvCache::slot_of(std::span<const int32_t> block_table, int32_t position) const {
  const int64_t block_index = position / spec_.block_size;
  DI_CHECK(position >= 0 && block_index < static_cast<int64_t>(block_table.size()), "KV position ",
           position, " is outside the sequence's ", block_table.size(), " blocks");
  const int64_t block = block_table[static_cast<size_t>(block_index)];
  return block * spec_.block_size + position % spec_.block_size;
}

void KvCache::write_rows(const Store& store, int64_t layer, std::span<const int32_t> block_table,
                         const int32_t* positions, int64_t tokens, const float* x) {
  const auto l = static_cast<size_t>(layer);
  auto* values = static_cast<char*>(store.values[l].raw());
  float* scales = spec_.dtype == DType::i8 ? store.scales[l].data<float>() : nullptr;
  const auto element_bytes = static_cast<int64_t>(dtype_size(spec_.dtype));
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = slot_of(block_table, positions[t]);
    for (int64_t h = 0; h < store.heads; ++h) {
      const int64_t row = kernels::kv_cache_row(slot, h, store.heads, head_rows());
      store_kv_row(x + (t * store.heads + h) * store.width, store.width, spec_.dtype, store.group,
                   values + row * store.width * element_bytes,
                   scales ? scales + row * (store.width / store.group) : nullptr);
    }
  }
}

void KvCache::write(int64_t layer, std::span<const int32_t> block_table, const int32_t* positions,
                    int64_t tokens, const float* k, const float* v) {
  DI_CHECK(layer >= 0 && layer < spec_.num_layers, "KV cache: layer ", layer, " out of range");
  write_rows(k_, layer, block_table, positions, tokens, k);
  if (spec_.v_head_dim > 0) write_rows(v_, layer, block_table, positions, tokens, v);
}

void KvCache::gather_k(int64_t layer, std::span<const int32_t> block_table, int64_t count,
                       float* out) const {
  DI_CHECK(layer >= 0 && layer < spec_.num_layers, "KV cache: layer ", layer, " out of range");
  const auto l = static_cast<size_t>(layer);
  const auto* values = static_cast<const char*>(k_.values[l].raw());
  const float* scales = spec_.dtype == DType::i8 ? k_.scales[l].data<float>() : nullptr;
  const auto element_bytes = static_cast<int64_t>(dtype_size(spec_.dtype));
  const int64_t width = spec_.head_dim;
  for (int64_t p = 0; p < count; ++p) {
    const int64_t slot = slot_of(block_table, static_cast<int32_t>(p));
    for (int64_t h = 0; h < spec_.kv_heads; ++h) {
      const int64_t row = kernels::kv_cache_row(slot, h, spec_.kv_heads, head_rows());
      load_kv_row(values + row * width * element_bytes, width, spec_.dtype, group_,
                  scales ? scales + row * (width / group_) : nullptr,
                  out + (p * spec_.kv_heads + h) * width);
    }
  }
}

kernels::PagedKv KvCache::view(int64_t layer, std::span<const int32_t> block_table) const {
  const auto l = static_cast<size_t>(layer);
  kernels::PagedKv kv;
  kv.k = k_.values[l].raw();
  kv.v = v_.values.empty() ? nullptr : v_.values[l].raw();
  kv.block_size = spec_.block_size;
  kv.kv_heads = spec_.kv_heads;
  kv.head_dim = spec_.head_dim;
  kv.v_head_dim = spec_.v_head_dim;
  kv.block_table = block_table;
  kv.dtype = spec_.dtype;
  kv.head_rows = head_rows();
  if (spec_.dtype == DType::i8) {
    kv.k_scale = k_.scales[l].data<float>();
    kv.v_scale = v_.scales.empty() ? nullptr : v_.scales[l].data<float>();
    kv.quant_group = group_;
  }
  return kv;
}

bool KvCache::has_index(int64_t layer) const {
  return spec_.index_dim > 0 && layer >= 0 && layer < spec_.num_layers &&
         spec_.index_layers[static_cast<size_t>(layer)];
}

void KvCache::write_index(int64_t layer, std::span<const int32_t> block_table,
                          const int32_t* positions, int64_t tokens, const float* keys) {
  DI_CHECK(has_index(layer), "KV cache: layer ", layer, " has no indexer keys");
  write_rows(index_, layer, block_table, positions, tokens, keys);
}

kernels::PagedKv KvCache::index_view(int64_t layer, std::span<const int32_t> block_table) const {
  DI_CHECK(has_index(layer), "KV cache: layer ", layer, " has no indexer keys");
  const auto l = static_cast<size_t>(layer);
  kernels::PagedKv kv;
  kv.k = index_.values[l].raw();
  kv.block_size = spec_.block_size;
  kv.kv_heads = 1;
  kv.head_dim = spec_.index_dim;
  kv.block_table = block_table;
  kv.dtype = spec_.dtype;
  kv.head_rows = head_rows();
  if (spec_.dtype == DType::i8) {
    kv.k_scale = index_.scales[l].data<float>();
    kv.quant_group = index_.group;
  }
  return kv;
}

}  // namespace deepinfer::cache
