// The grouped expert job of packed_experts.h: packing gate and up side by side, the x side
// (bf16 rounding for MatmulPrecision::bf16, as gemm_packed.cpp does it), and one thread split
// over the (group, panel) work items of every group of the step. The arithmetic is the packed
// GEMM's micro-kernels (gemm_packed_avx512.cpp, gemm_packed_avx2.cpp), called per work item.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/gemm_packed.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/linear_schedule.h"
#include "kernels/packed_experts.h"

namespace deepinfer::kernels {
namespace {

using detail::kPanel;
constexpr int64_t kHalf = kPanel / 2;  // gate (then up) rows per panel
// Rows of x per work item, as in gemm_packed.cpp: the x block of one k chunk stays in L2.
constexpr int64_t kRowBlock = 256;

// Panels per work item: small row counts take up to 4 panels per register tile (decode); larger
// ones reuse each k chunk of x over 8 panels (the micro-kernels' panel group).
int64_t panels_per_item(int64_t rows) {
  return rows <= 14 ? 4 : 8;
}

void pack_gate_up(const void* gate, const void* up, DType dtype, int64_t inter, int64_t k,
                  void* panels) {
  const int64_t elems = detail::packed_panel_elements(k, dtype);
  for (int64_t j = 0; j < inter; ++j) {
    const int64_t panel = j / kHalf;
    for (int half = 0; half < 2; ++half) {
      const int64_t col = j % kHalf + half * kHalf;
      const void* matrix = half == 0 ? gate : up;
      if (dtype == DType::f32) {
        const float* src = static_cast<const float*>(matrix) + j * k;
        float* dst = static_cast<float*>(panels) + panel * elems + col;
        for (int64_t p = 0; p < k; ++p) dst[p * kPanel] = src[p];
      } else {
        const uint16_t* src = static_cast<const uint16_t*>(matrix) + j * k;
        uint16_t* dst = static_cast<uint16_t*>(panels) + panel * elems + col * 2;
        for (int64_t p = 0; p < k; ++p) dst[p / 2 * 2 * kPanel + p % 2] = src[p];
      }
    }
  }
}

// How one operand's x side enters the packed kernel (gemm_packed.cpp's choice).
enum class XSide { f32, bf16_dpbf, rounded };

XSide x_side(DType weights) {
  if (weights != DType::bf16 || matmul_precision() != MatmulPrecision::bf16) return XSide::f32;
  return active_isa() == Isa::avx512 && cpu_has_avx512_bf16() ? XSide::bf16_dpbf : XSide::rounded;
}

int64_t x_stride(XSide side, int64_t k) {
  return side == XSide::bf16_dpbf ? detail::avx512::linear_bf16_x_stride(k) : k;
}

// args' x side for rows x[rows, k]: f32 as is, or rounded into `scratch` (floats or bf16).
void set_x(detail::PackedArgs& args, XSide side, const float* x, int64_t rows, int64_t k,
           void* scratch) {
  args.x_stride = x_stride(side, k);
  args.x = x;
  args.xb = nullptr;
  if (side == XSide::bf16_dpbf) {
    auto* xb = static_cast<uint16_t*>(scratch);
    detail::avx512::linear_pack_x_bf16(x, rows, k, xb);
    args.x = nullptr;
    args.xb = xb;
  } else if (side == XSide::rounded) {
    auto* rounded = static_cast<float*>(scratch);
    for (int64_t p = 0; p < rows * k; ++p) rounded[p] = bf16_to_f32(f32_to_bf16(x[p]));
    args.x = rounded;
  }
}

detail::PackedKind kind_of(DType weights, XSide side) {
  if (weights == DType::f32) return detail::PackedKind::f32;
  return side == XSide::bf16_dpbf ? detail::PackedKind::bf16_dpbf : detail::PackedKind::bf16;
}

// Scratch elements set_x() needs (in units of 4 bytes, enough for either form).
int64_t x_scratch_words(XSide side, int64_t rows, int64_t k) {
  if (side == XSide::f32) return 0;
  return side == XSide::bf16_dpbf ? ((rows + detail::kPackedXSlackRows) * x_stride(side, k) + 1) / 2
                                  : rows * k;
}

struct Item {
  int64_t group, m0, m1, p0, p1;
};

std::vector<Item> work_items(std::span<const ExpertRows> groups, bool down) {
  std::vector<Item> items;
  for (size_t g = 0; g < groups.size(); ++g) {
    const PackedExpert& e = *groups[g].expert;
    const int64_t n = down ? e.hidden() : 2 * ((e.intermediate() + kHalf - 1) / kHalf) * kHalf;
    const int64_t panels = (n + kPanel - 1) / kPanel;
    for (int64_t m0 = 0; m0 < groups[g].rows; m0 += kRowBlock) {
      const int64_t m1 = std::min(groups[g].rows, m0 + kRowBlock);
      const int64_t per = panels_per_item(m1 - m0);
      for (int64_t p0 = 0; p0 < panels; p0 += per)
        items.push_back({static_cast<int64_t>(g), m0, m1, p0, std::min(panels, p0 + per)});
    }
  }
  return items;
}

float* tile_buffer(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

std::vector<float>& step_buffer(int which) {
  thread_local std::vector<float> buffers[3];
  return buffers[which];
}

// Under the scalar ISA: the stored matrices, gate and up apart.
void expert_mlp_stored(const ExpertRows& g, ThreadPool& pool) {
  const PackedExpert& e = *g.expert;
  const int64_t h = e.hidden(), i = e.intermediate();
  std::vector<float> gate(static_cast<size_t>(g.rows * i)), up(gate.size());
  linear(g.x, g.rows, h, e.gate(), e.dtype(), i, nullptr, gate.data(), pool);
  linear(g.x, g.rows, h, e.up(), e.dtype(), i, nullptr, up.data(), pool);
  silu_mul(gate.data(), up.data(), gate.data(), g.rows * i);
  linear(gate.data(), g.rows, i, e.down().source(), e.down().dtype(), h, nullptr, g.y, pool);
}

}  // namespace

PackedExpert pack_expert(const void* gate, const void* up, DType dtype, const void* down,
                         DType down_dtype, int64_t hidden, int64_t intermediate, bool huge_pages) {
  PackedExpert packed;
  if (!packs_weights(dtype) || !packs_weights(down_dtype)) return packed;
  DI_CHECK(gate != nullptr && up != nullptr && down != nullptr && hidden > 0 && intermediate > 0,
           "kernels::pack_expert: empty expert (hidden ", hidden, ", intermediate ", intermediate,
           ")");
  packed.down_ = pack_weights(down, down_dtype, hidden, intermediate, huge_pages);
  if (!packed.down_.defined()) return PackedExpert();
  const int64_t panels = (intermediate + kHalf - 1) / kHalf;
  const size_t bytes = static_cast<size_t>(panels * detail::packed_panel_elements(hidden, dtype)) *
                       dtype_size(dtype);
  std::shared_ptr<void> memory =
      detail::allocate_packed(bytes, huge_pages, "packed expert gate / up");
  std::memset(memory.get(), 0, bytes);  // rows past I and the odd-k half pairs multiply as 0
  pack_gate_up(gate, up, dtype, intermediate, hidden, memory.get());
  packed.gate_up_ = std::move(memory);
  packed.gate_up_bytes_ = bytes;
  packed.gate_ = gate;
  packed.up_ = up;
  packed.dtype_ = dtype;
  packed.hidden_ = hidden;
  packed.intermediate_ = intermediate;
  return packed;
}

void expert_mlps(std::span<const ExpertRows> groups, ThreadPool& pool) {
  for (const ExpertRows& g : groups) {
    DI_CHECK(g.expert != nullptr && g.expert->defined() && g.rows >= 0,
             "kernels::expert_mlps: a group without packed expert weights (pack_expert() found "
             "no packed kernel for them)");
    DI_CHECK(g.rows == 0 || (g.x != nullptr && g.y != nullptr),
             "kernels::expert_mlps: null rows for a group of ", g.rows);
  }
  const Isa isa = active_isa();
  if (isa == Isa::scalar) {  // packed under AVX2 / AVX-512, the ISA forced to scalar since
    for (const ExpertRows& g : groups)
      if (g.rows > 0) expert_mlp_stored(g, pool);
    return;
  }
  const size_t count = groups.size();
  // Per group: the two calls' arguments and where its activations live.
  std::vector<detail::PackedArgs> gate_up(count), down(count);
  std::vector<XSide> x_gate_up(count), x_down(count);
  std::vector<int64_t> act_at(count + 1, 0), x_at(count + 1, 0), act_x_at(count + 1, 0);
  for (size_t g = 0; g < count; ++g) {
    const PackedExpert& e = *groups[g].expert;
    const int64_t rows = groups[g].rows;
    x_gate_up[g] = x_side(e.dtype());
    x_down[g] = x_side(e.down().dtype());
    act_at[g + 1] = act_at[g] + rows * e.intermediate();
    x_at[g + 1] = x_at[g] + x_scratch_words(x_gate_up[g], rows, e.hidden());
    act_x_at[g + 1] = act_x_at[g] + x_scratch_words(x_down[g], rows, e.intermediate());
  }
  // The caller's buffers, reused across steps (the workers see them through these references).
  std::vector<float>& act = step_buffer(0);
  std::vector<float>& x_words = step_buffer(1);
  std::vector<float>& act_words = step_buffer(2);
  act.resize(static_cast<size_t>(act_at[count]));
  x_words.resize(static_cast<size_t>(x_at[count]));
  act_words.resize(static_cast<size_t>(act_x_at[count]));

  // The x side of every group (a copy only for bf16 activations).
  const auto prepare = [&](bool for_down) {
    pool.parallel_for(static_cast<int64_t>(count), [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        const PackedExpert& e = *groups[g].expert;
        const int64_t rows = groups[g].rows;
        detail::PackedArgs& a = for_down ? down[g] : gate_up[g];
        const XSide side = for_down ? x_down[g] : x_gate_up[g];
        const int64_t k = for_down ? e.intermediate() : e.hidden();
        const float* x = for_down ? act.data() + act_at[g] : groups[g].x;
        float* scratch = for_down ? act_words.data() + act_x_at[g] : x_words.data() + x_at[g];
        set_x(a, side, x, rows, k, scratch);
        a.k = k;
        a.kind = kind_of(for_down ? e.down().dtype() : e.dtype(), side);
      }
    });
  };
  const auto rows_fn = [isa](const detail::PackedArgs& a, int64_t m0, int64_t m1, int64_t p0,
                             int64_t p1) { detail::packed_rows(isa, a.kind)(a, m0, m1, p0, p1); };
  const auto x_rows = [](detail::PackedArgs& a, int64_t m0) {
    if (a.xb != nullptr) {
      a.xb += m0 * a.x_stride;
    } else {
      a.x += m0 * a.x_stride;
    }
  };

  // Pass 1: gate and up of 16 activations per panel, SiLU·up from the tile.
  prepare(false);
  const std::vector<Item> first = work_items(groups, false);
  detail::run_items_stealing(
      pool, static_cast<int64_t>(first.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const Item& it = first[static_cast<size_t>(t)];
          const PackedExpert& e = *groups[static_cast<size_t>(it.group)].expert;
          const int64_t i = e.intermediate(), rows = it.m1 - it.m0;
          detail::PackedArgs a = gate_up[static_cast<size_t>(it.group)];
          x_rows(a, it.m0);
          const int64_t elems = detail::packed_panel_elements(e.hidden(), e.dtype());
          a.w = static_cast<const char*>(e.gate_up_panels()) +
                it.p0 * elems * static_cast<int64_t>(dtype_size(e.dtype()));
          a.n = (it.p1 - it.p0) * kPanel;
          a.y = tile_buffer(static_cast<size_t>(rows * a.n));
          rows_fn(a, 0, rows, 0, it.p1 - it.p0);
          float* out = act.data() + act_at[static_cast<size_t>(it.group)] + it.m0 * i;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t p = it.p0; p < it.p1; ++p) {
              const float* tile = a.y + r * a.n + (p - it.p0) * kPanel;
              const int64_t cols = std::min(kHalf, i - p * kHalf);
              silu_mul(tile, tile + kHalf, out + r * i + p * kHalf, cols);
            }
          }
        }
      });

  // Pass 2: down, straight into y.
  prepare(true);
  const std::vector<Item> second = work_items(groups, true);
  detail::run_items_stealing(pool, static_cast<int64_t>(second.size()), 1,
                             [&](int64_t begin, int64_t end) {
                               for (int64_t t = begin; t < end; ++t) {
                                 const Item& it = second[static_cast<size_t>(t)];
                                 const ExpertRows& g = groups[static_cast<size_t>(it.group)];
                                 const PackedExpert& e = *g.expert;
                                 detail::PackedArgs a = down[static_cast<size_t>(it.group)];
                                 x_rows(a, it.m0);
                                 a.w = e.down().panels();
                                 a.n = e.hidden();
                                 a.y = g.y + it.m0 * e.hidden();
                                 rows_fn(a, 0, it.m1 - it.m0, it.p0, it.p1);
                               }
                             });
}

}  // namespace deepinfer::kernels
