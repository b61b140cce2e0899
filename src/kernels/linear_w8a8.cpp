// kernels::linear_w8a8: argument checks, the per-token quantization of x (shared by every ISA),
// ISA dispatch and threading of the W8A8 linear (arithmetic: linear_w8a8.h).
#include "kernels/linear_w8a8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/linear_schedule.h"

namespace deepinfer::kernels {
namespace {

constexpr int64_t kTileN = 8;
constexpr int64_t kRowBlock = 64;
// vpdpbusd's (x + 128) * w sums reach 255 * 128 * k: int32 holds them below this.
constexpr int64_t kMaxK = int64_t{1} << 16;

using RowsFn = void (*)(const detail::W8a8Args&, int64_t, int64_t, int64_t, int64_t);

RowsFn w8a8_rows(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return cpu_has_avx512_vnni() ? &detail::avx512vnni::linear_w8a8_rows
                                   : &detail::avx512::linear_w8a8_rows;
    case Isa::avx2:
      return &detail::avx2::linear_w8a8_rows;
    case Isa::scalar:
      break;
  }
  return &detail::scalar::linear_w8a8_rows;
}

}  // namespace

void quantize_w8a8_row(const float* x, int64_t k, int8_t* q, float* scale) {
  float amax = 0.0f;
  for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(x[c]));
  *scale = amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int64_t c = 0; c < k; ++c) {
    const float v = std::nearbyint(x[c] * inv);
    q[c] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
}

void linear_w8a8(const float* x, int64_t m, int64_t k, const int8_t* w, const float* w_scale,
                 int64_t n, const float* bias, float* y, ThreadPool& pool) {
  DI_CHECK(m >= 0 && k >= 0 && n >= 0, "kernels::linear_w8a8: negative size (m=", m, ", k=", k,
           ", n=", n, ")");
  DI_CHECK(k < kMaxK, "kernels::linear_w8a8: k = ", k, " is too long for int32 sums (at most ",
           kMaxK - 1, ")");
  if (m == 0 || n == 0) return;
  DI_CHECK(y != nullptr && (k == 0 || (x != nullptr && w != nullptr && w_scale != nullptr)),
           "kernels::linear_w8a8: null data pointer (m=", m, ", k=", k, ", n=", n, ")");
  const int64_t stride = (k + detail::kW8a8Pad - 1) / detail::kW8a8Pad * detail::kW8a8Pad;
  // Per call, per token: int8 x (zero-padded) and x + 128 for VNNI (128-padded).
  std::vector<int8_t> xq(static_cast<size_t>(m * stride), 0);
  std::vector<uint8_t> xu(static_cast<size_t>(m * stride), 128);
  std::vector<float> xs(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    int8_t* q = xq.data() + i * stride;
    quantize_w8a8_row(x + i * k, k, q, &xs[static_cast<size_t>(i)]);
    for (int64_t c = 0; c < k; ++c)
      xu[static_cast<size_t>(i * stride + c)] = static_cast<uint8_t>(q[c] + 128);
  }
  const detail::W8a8Args args{xq.data(), xu.data(), xs.data(), stride, k, w, w_scale, n, bias, y};
  const RowsFn rows = w8a8_rows(active_isa());
  detail::run_output_tiles(
      pool, m, n, k, kTileN, kRowBlock,
      [&](int64_t r0, int64_t r1, int64_t j0, int64_t j1) { rows(args, r0, r1, j0, j1); });
}

}  // namespace deepinfer::kernels
