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
  detail::run_output_tiles(
      pool, m, n, k, kTileN, kRowBlock,
      [&](int64_t r0, int64_t r1, int64_t j0, int64_t j1) { rows(args, r0, r1, j0, j1); });
}

}  // namespace deepinfer::kernels
