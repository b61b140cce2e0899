// kernels::linear_fp8: argument checks, ISA dispatch and threading of the FP8 block-scaled
// linear (the arithmetic: linear_fp8.h and linear_fp8_{scalar,avx2,avx512}.cpp).
#include "kernels/linear_fp8.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/linear_schedule.h"

namespace deepinfer::kernels {
namespace {

constexpr int64_t kTileN = 8;      // outputs per work item
constexpr int64_t kRowBlock = 64;  // x rows per work item
constexpr int64_t kMinMacsPerThread = int64_t{1} << 16;

using RowsFn = void (*)(const detail::Fp8LinearArgs&, int64_t, int64_t, int64_t, int64_t);

RowsFn fp8_rows(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return &detail::avx512::linear_fp8_rows;
    case Isa::avx2:
      return &detail::avx2::linear_fp8_rows;
    case Isa::scalar:
      break;
  }
  return &detail::scalar::linear_fp8_rows;
}

}  // namespace

void linear_fp8(const float* x, int64_t m, int64_t k, const Fp8Weight& w, int64_t n,
                const float* bias, float* y, ThreadPool& pool) {
  DI_CHECK(m >= 0 && k >= 0 && n >= 0, "kernels::linear_fp8: negative size (m=", m, ", k=", k,
           ", n=", n, ")");
  DI_CHECK(w.block_rows > 0 && w.block_cols > 0 && w.block_cols % detail::kFp8Lanes == 0,
           "kernels::linear_fp8: FP8 block scales of ", w.block_rows, "x", w.block_cols,
           " are not supported (block columns must be a positive multiple of 16)");
  if (m == 0 || n == 0) return;
  DI_CHECK(y != nullptr && (k == 0 || (x != nullptr && w.q != nullptr && w.scale != nullptr)),
           "kernels::linear_fp8: null data pointer (m=", m, ", k=", k, ", n=", n, ")");
  detail::Fp8LinearArgs args{
      x, k,    w.q, w.scale, (k + w.block_cols - 1) / w.block_cols, w.block_rows, w.block_cols,
      n, bias, y};
  const RowsFn rows = fp8_rows(active_isa());
  const int64_t n_tiles = (n + kTileN - 1) / kTileN;
  const int64_t m_blocks = (m + kRowBlock - 1) / kRowBlock;
  const int64_t macs_per_item = std::min(m, kRowBlock) * kTileN * std::max<int64_t>(k, 1);
  const int64_t min_chunk = std::max<int64_t>(1, kMinMacsPerThread / macs_per_item);
  // Item (nt, mb) = nt * m_blocks + mb: n-tile major, so a thread keeps its weight rows.
  detail::run_items_stealing(pool, n_tiles * m_blocks, min_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t nt = item / m_blocks, mb = item % m_blocks;
      rows(args, mb * kRowBlock, std::min(m, (mb + 1) * kRowBlock), nt * kTileN,
           std::min(n, (nt + 1) * kTileN));
    }
  });
}

}  // namespace deepinfer::kernels
