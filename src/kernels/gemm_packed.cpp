// kernels::linear on packed weights: packing (once, at load), the x side (bf16 rounding for
// MatmulPrecision::bf16), and the thread split. The arithmetic lives in gemm_packed_avx512.cpp
// and gemm_packed_avx2.cpp.
#include "kernels/gemm_packed.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/huge_page_arena.h"
#include "core/quant_blocks.h"
#include "kernels/backend.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/linear_schedule.h"
#include "kernels/whole_block_layout.h"

namespace deepinfer::kernels {
namespace {

using detail::kPanel;

// set_weight_packing()'s value, or -1: DEEPINFER_PACK_WEIGHTS (read once), else on.
std::atomic<int> g_weight_packing{-1};

bool env_weight_packing() {
  static const bool enabled = [] {
    const char* value = std::getenv("DEEPINFER_PACK_WEIGHTS");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return enabled;
}

// Rows of x per work item: a multiple of every row tile, and small enough that the x block of
// one k chunk (256 rows × 256 f32) stays in L2 while the item's panels pass over it.
constexpr int64_t kRowBlock = 256;
// Below this many multiply-adds per thread, waking workers costs more than it saves.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 16;

// The calling thread's x rounded to bf16 (AVX512_BF16) or to bf16-valued f32 (without it).
uint16_t* bf16_x_buffer(size_t elements) {
  thread_local std::vector<uint16_t> buffer;
  if (buffer.size() < elements) buffer.resize(elements);
  return buffer.data();
}
float* rounded_x_buffer(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

void pack_f32(const float* w, int64_t n, int64_t k, float* panels) {
  const int64_t elems = detail::packed_panel_elements(k, DType::f32);
  for (int64_t j = 0; j < n; ++j) {
    float* dst = panels + j / kPanel * elems + j % kPanel;
    const float* src = w + j * k;
    for (int64_t p = 0; p < k; ++p) dst[p * kPanel] = src[p];
  }
}

void pack_bf16(const uint16_t* w, int64_t n, int64_t k, uint16_t* panels) {
  const int64_t elems = detail::packed_panel_elements(k, DType::bf16);
  for (int64_t j = 0; j < n; ++j) {
    uint16_t* dst = panels + j / kPanel * elems + j % kPanel * 2;
    const uint16_t* src = w + j * k;
    for (int64_t p = 0; p < k; ++p) dst[p / 2 * 2 * kPanel + p % 2] = src[p];
  }
}

}  // namespace

void set_weight_packing(bool enabled) {
  g_weight_packing.store(enabled ? 1 : 0, std::memory_order_relaxed);
}

bool weight_packing() {
  const int set = g_weight_packing.load(std::memory_order_relaxed);
  return set >= 0 ? set == 1 : env_weight_packing();
}

bool repacks_blocks(DType dtype) {
  // The decode of these spent its time transposing the stored rows, not reading them (AVX-512
  // q5_0 also gathering its fifth bits): docs/PERFORMANCE.md ("q4_0 repacked at load", "q5_0
  // and q4_k repacked", "repacked blocks on AVX-512").
  return weight_packing() && detail::wb::reads_repacked_layout(active_isa()) &&
         detail::wb::has_repacked_layout(dtype);
}

bool reads_repacked_blocks(const PackedWeights& w) {
  return w.defined() && is_block_dtype(w.dtype()) && w.repacked_rows() > 0 &&
         w.repacked_rows() == repacked_row_unit();
}

int64_t repacked_row_unit() {
  const Isa isa = active_isa();
  return detail::wb::reads_repacked_layout(isa)
             ? detail::wb::kRepackRows * detail::wb::interleaved_groups(isa)
             : 0;
}

bool packs_weights(DType dtype) {
  if (!weight_packing() || active_isa() == Isa::scalar) return false;
  // f32 and bf16 on both ISAs. (AVX2 kept bf16 as stored until session 17: its packed decode
  // had read 0-12 % slower; with the panel prefetches since, `kernels_bench --gemm --isa avx2
  // --m 1` on an AMD Zen 4 streams bf16 at 24-31 GB/s packed against 16-25 raw.)
  return dtype == DType::f32 || dtype == DType::bf16;
}

namespace detail {

PackedRowsFn packed_rows(Isa isa, PackedKind kind) {
  // AMX: bf16 activations on tiles for every m (gemm_packed_amx.cpp: batch invariance).
  if (kind == PackedKind::bf16_dpbf && amx_active()) return &avx512::gemm_packed_rows_amx;
  return isa == Isa::avx512 ? &avx512::gemm_packed_rows : &avx2::gemm_packed_rows;
}

std::shared_ptr<void> allocate_packed(size_t bytes, bool huge_pages, const char* what) {
  if (huge_pages) return allocate_huge_paged(bytes, what);
  void* memory = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  DI_CHECK(memory != nullptr, "kernels: cannot allocate ", bytes, " bytes for ", what);
  return std::shared_ptr<void>(memory, [](void* p) { std::free(p); });
}

}  // namespace detail

PackedWeights pack_weights(const void* w, DType dtype, int64_t n, int64_t k, bool huge_pages) {
  PackedWeights packed;
  // The unit first: repacking follows the ISA read here, once.
  const int64_t unit = repacked_row_unit();
  const bool repack = unit > 0 && repacks_blocks(dtype) && k % block_traits(dtype)->block_size == 0;
  if (!packs_weights(dtype) && !repack) return packed;
  if (w == nullptr || n <= 0 || k <= 0) return packed;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  const int64_t units = repack ? (n + unit - 1) / unit : 0;
  const size_t bytes = repack
                           ? static_cast<size_t>(units * unit) * dtype_bytes(dtype, k)
                           : static_cast<size_t>(panels * detail::packed_panel_elements(k, dtype)) *
                                 dtype_size(dtype);
  std::shared_ptr<void> memory_owner = detail::allocate_packed(bytes, huge_pages, "packed weights");
  void* memory = memory_owner.get();
  if (repack) {
    // Every byte of the whole units is written; the padding rows of the last multiply as 0.
    const size_t unit_bytes = static_cast<size_t>(unit) * dtype_bytes(dtype, k);
    if (n % unit != 0)
      std::memset(static_cast<std::byte*>(memory) + bytes - unit_bytes, 0, unit_bytes);
    detail::wb::repack_rows(dtype, static_cast<const uint8_t*>(w), n, k,
                            unit / detail::wb::kRepackRows, static_cast<uint8_t*>(memory));
    packed.repacked_rows_ = unit;
  } else {
    std::memset(memory, 0, bytes);  // the padding rows and the odd-k half pairs multiply as 0
    if (dtype == DType::f32) {
      pack_f32(static_cast<const float*>(w), n, k, static_cast<float*>(memory));
    } else {
      pack_bf16(static_cast<const uint16_t*>(w), n, k, static_cast<uint16_t*>(memory));
    }
  }
  packed.panels_ = std::move(memory_owner);
  packed.source_ = w;
  packed.dtype_ = dtype;
  packed.n_ = n;
  packed.k_ = k;
  packed.bytes_ = bytes;
  return packed;
}

void linear(const float* x, int64_t m, const PackedWeights& w, const float* bias, float* y,
            ThreadPool& pool) {
  DI_CHECK(w.defined(),
           "kernels::linear: packed weights are empty (pack_weights() found no "
           "packed kernel for them: call linear() on the stored matrix)");
  DI_CHECK(m >= 0, "kernels::linear: negative row count ", m);
  const int64_t k = w.k(), n = w.n();
  const Isa isa = active_isa();
  if (is_block_dtype(w.dtype())) {  // repacked for AVX2 / AVX-512 (repacks_blocks); else as stored
    const bool repacked = reads_repacked_blocks(w);
    return detail::linear_with_layout(x, m, k, repacked ? w.panels() : w.source(), w.dtype(),
                                      repacked, n, bias, y, pool);
  }
  if (isa == Isa::scalar)  // packed under AVX2 / AVX-512, the ISA forced to scalar since
    return linear(x, m, k, w.source(), w.dtype(), n, bias, y, pool);
  if (m == 0) return;
  DI_CHECK(x != nullptr && y != nullptr, "kernels::linear: null data pointer (m=", m, ", k=", k,
           ", n=", n, ")");

  detail::PackedArgs args;
  args.x = x;
  args.x_stride = k;
  args.k = k;
  args.w = w.panels();
  args.kind = w.dtype() == DType::f32 ? detail::PackedKind::f32 : detail::PackedKind::bf16;
  args.n = n;
  args.bias = bias;
  args.y = y;
  if (w.dtype() == DType::bf16 && matmul_precision() == MatmulPrecision::bf16) {
    if (isa == Isa::avx512 && cpu_has_avx512_bf16()) {
      const int64_t stride = detail::avx512::linear_bf16_x_stride(k);  // even, zero-padded
      uint16_t* xb = bf16_x_buffer(static_cast<size_t>((m + detail::kPackedXSlackRows) * stride));
      detail::avx512::linear_pack_x_bf16(x, m, k, xb);
      args.x = nullptr;
      args.xb = xb;
      args.x_stride = stride;
      args.kind = detail::PackedKind::bf16_dpbf;
    } else {
      float* rounded = rounded_x_buffer(static_cast<size_t>(m * k));
      for (int64_t p = 0; p < m * k; ++p) rounded[p] = bf16_to_f32(f32_to_bf16(x[p]));
      args.x = rounded;
    }
  }

  const int64_t panels = (n + kPanel - 1) / kPanel;
  const int64_t m_blocks = (m + kRowBlock - 1) / kRowBlock;
  // An item is a register tile's panels (two for the large-m pairs, up to four for small m)
  // by a block of rows, so that no thread's share splits a tile into narrower ones; panel
  // major, so that a thread keeps its weight panels.
  const detail::PackedRowsFn rows = detail::packed_rows(isa, args.kind);
  const int64_t group = rows == &detail::avx512::gemm_packed_rows_amx ? 1  // AMX: a panel at a time
                        : isa == Isa::avx512
                            ? detail::avx512::panels_per_tile(args.kind, std::min(m, kRowBlock))
                            : detail::avx2::panels_per_tile(args.kind, std::min(m, kRowBlock));
  const int64_t units = (panels + group - 1) / group;
  const int64_t items = units * m_blocks;
  const int64_t macs_per_item = std::min(m, kRowBlock) * group * kPanel * k;
  const int64_t min_chunk = std::max<int64_t>(1, kMinMacsPerThread / macs_per_item);
  detail::run_items_stealing(pool, items, min_chunk, [&](int64_t begin, int64_t end) {
    const int64_t first = begin / m_blocks, last = (end - 1) / m_blocks;
    for (int64_t mb = 0; mb < m_blocks; ++mb) {
      int64_t lo = first, hi = last;
      if (lo * m_blocks + mb < begin) ++lo;
      if (hi * m_blocks + mb >= end) --hi;
      if (lo > hi) continue;
      const int64_t m0 = mb * kRowBlock, m1 = std::min(m, m0 + kRowBlock);
      rows(args, m0, m1, lo * group, std::min(panels, (hi + 1) * group));
    }
  });
}

}  // namespace deepinfer::kernels
