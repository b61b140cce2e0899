#include "model/layers/moe/expert_stack.h"

#include <functional>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/layers/moe/expert_slices.h"

namespace deepinfer::model {
namespace {

bool stack_of(const Tensor& t, int64_t count, int64_t rows, int64_t cols) {
  return t.ndim() == 3 && t.dim(0) == count && t.dim(1) == rows && t.dim(2) == cols &&
         t.is_contiguous();
}

}  // namespace

ExpertStack::ExpertStack(Tensor gate_up, Tensor down)
    : gate_up_(std::move(gate_up)), down_(std::move(down)) {
  DI_CHECK(down_.ndim() == 3 && down_.is_contiguous() &&
               stack_of(gate_up_, down_.dim(0), 2 * down_.dim(2), down_.dim(1)),
           "expert stacks must be contiguous gate_up [E, 2I, H] and down [E, H, I], got ",
           gate_up_.describe(), " and ", down_.describe());
}

ExpertStack::ExpertStack(Tensor gate, Tensor up, Tensor down)
    : gate_(std::move(gate)), up_(std::move(up)), down_(std::move(down)) {
  DI_CHECK(down_.ndim() == 3 && down_.is_contiguous() &&
               stack_of(gate_, down_.dim(0), down_.dim(2), down_.dim(1)) &&
               stack_of(up_, down_.dim(0), down_.dim(2), down_.dim(1)) &&
               gate_.dtype() == up_.dtype(),
           "expert stacks must be contiguous gate and up [E, I, H] of one dtype and down "
           "[E, H, I], got ",
           gate_.describe(), ", ", up_.describe(), " and ", down_.describe());
}

ExpertStack::ExpertStack(Tensor gate, Tensor up, Tensor down, Fp8Scales scales)
    : ExpertStack(std::move(gate), std::move(up), std::move(down)) {
  fp8_ = std::move(scales);
  const auto scale_shape = [&](const Tensor& t) {
    return Shape{t.dim(0), (t.dim(1) + fp8_.block_rows - 1) / fp8_.block_rows,
                 (t.dim(2) + fp8_.block_cols - 1) / fp8_.block_cols};
  };
  DI_CHECK(gate_.dtype() == DType::f8_e4m3 && down_.dtype() == DType::f8_e4m3 &&
               fp8_.block_rows > 0 && fp8_.block_cols > 0 &&
               fp8_.gate.shape() == scale_shape(gate_) && fp8_.up.shape() == scale_shape(up_) &&
               fp8_.down.shape() == scale_shape(down_),
           "FP8 expert stacks need f8_e4m3 gate / up / down with f32 block scales of their "
           "shapes, got ",
           gate_.describe(), " / ", down_.describe(), " with scales ", fp8_.gate.describe(), " / ",
           fp8_.down.describe());
}

namespace {

// Experts [first, first + count) of an FP8 checkpoint kept in FP8: per-expert matrices and their
// scales copied into stacks (gate / up / down apart: a fused gate_up would need I to be whole
// scale blocks).
ExpertStack load_fp8(WeightLoader& weights,
                     const std::function<std::string(int64_t, const char*)>& name, int64_t first,
                     int64_t count, int64_t hidden, int64_t i) {
  const io::Fp8BlockQuantization block = *weights.fp8();
  Tensor stacks[3], scales[3];
  const char* projs[3] = {"gate_proj", "up_proj", "down_proj"};
  for (int p = 0; p < 3; ++p) {
    const Shape shape = p < 2 ? Shape{i, hidden} : Shape{hidden, i};
    for (int64_t j = 0; j < count; ++j) {
      const std::string n = name(first + j, projs[p]);
      const Tensor w = weights.matrix(n, shape, MatrixUse::expert);
      DI_CHECK(w.dtype() == DType::f8_e4m3, n, ": ", w.describe(),
               " among FP8 experts (one expert's projections must share one dtype)");
      const Tensor& s = weights.fp8_scale(n).scale;
      if (j == 0) {
        stacks[p] = Tensor::zeros({count, shape[0], shape[1]}, DType::f8_e4m3);
        scales[p] = Tensor::zeros({count, s.dim(0), s.dim(1)}, DType::f32);
      }
      copy_into_expert(stacks[p], j, 0, w, n);
      copy_into_expert(scales[p], j, 0, s, n + "_scale_inv");
    }
  }
  return ExpertStack(stacks[0], stacks[1], stacks[2],
                     {scales[0], scales[1], scales[2], block.block_rows, block.block_cols});
}

}  // namespace

ExpertStack ExpertStack::load(WeightLoader& weights, const std::string& prefix, int64_t num_experts,
                              int64_t first, int64_t count, int64_t hidden, int64_t intermediate) {
  DI_CHECK(first >= 0 && count > 0 && first + count <= num_experts, prefix, ": experts [", first,
           ", ", first + count, ") outside the layer's ", num_experts, " experts");
  const int64_t i = intermediate;
  auto name = [&](int64_t e, const char* proj) {
    return prefix + "." + std::to_string(e) + "." + proj + ".weight";
  };
  // Other ranks' experts (expert parallelism) are theirs to read: not "unused" here. A GGUF file
  // names each expert too (as views of its stacks): those are not unused either when the
  // stacks are read whole.
  const auto skip_experts = [&](bool local_too) {
    for (int64_t e = 0; e < num_experts; ++e) {
      if (!local_too && e >= first && e < first + count) continue;
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        weights.skip(name(e, proj));
        weights.skip(name(e, proj) + "_scale_inv");
      }
    }
  };
  const auto local = [&](const Tensor& stack) { return stack.slice_rows(first, first + count); };
  if (weights.has(prefix + ".gate_up_proj")) {
    const Tensor gate_up =
        weights.matrix(prefix + ".gate_up_proj", {num_experts, 2 * i, hidden}, MatrixUse::expert);
    const Tensor down =
        weights.matrix(prefix + ".down_proj", {num_experts, hidden, i}, MatrixUse::expert);
    skip_experts(true);
    return ExpertStack(local(gate_up), local(down));
  }
  if (weights.has(prefix + ".gate_proj") && weights.has(prefix + ".up_proj")) {
    const Tensor gate =
        weights.matrix(prefix + ".gate_proj", {num_experts, i, hidden}, MatrixUse::expert);
    const Tensor up =
        weights.matrix(prefix + ".up_proj", {num_experts, i, hidden}, MatrixUse::expert);
    const Tensor down =
        weights.matrix(prefix + ".down_proj", {num_experts, hidden, i}, MatrixUse::expert);
    skip_experts(true);
    if (gate.dtype() == up.dtype()) return ExpertStack(local(gate), local(up), local(down));
    // A file may store gate and up in different types; one dtype per pair keeps the kernels
    // simple, and f32 holds both exactly.
    return ExpertStack(local(gate.to(DType::f32)), local(up.to(DType::f32)), local(down));
  }
  skip_experts(false);
  if (weights.fp8() && weights.has(name(first, "gate_proj")) &&
      weights.checkpoint().info(name(first, "gate_proj")).dtype == DType::f8_e4m3) {
    // Kept in FP8 when the loader keeps it (no --dtype / --quantization); else widened below.
    if (weights.keeps_fp8(MatrixUse::expert))
      return load_fp8(weights, name, first, count, hidden, i);
  }
  Tensor gate_up, down;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t e = first + j;
    Tensor gate = weights.matrix(name(e, "gate_proj"), {i, hidden}, MatrixUse::expert);
    Tensor up = weights.matrix(name(e, "up_proj"), {i, hidden}, MatrixUse::expert);
    const Tensor dn = weights.matrix(name(e, "down_proj"), {hidden, i}, MatrixUse::expert);
    if (gate.dtype() != up.dtype()) {
      gate = gate.to(DType::f32);
      up = up.to(DType::f32);
    }
    if (j == 0) {  // the stacks take the dtypes the loader gives the first expert
      gate_up = Tensor::zeros({count, 2 * i, hidden}, gate.dtype());
      down = Tensor::zeros({count, hidden, i}, dn.dtype());
    }
    copy_into_expert(gate_up, j, 0, gate, name(e, "gate_proj"));
    copy_into_expert(gate_up, j, i, up, name(e, "up_proj"));
    copy_into_expert(down, j, 0, dn, name(e, "down_proj"));
  }
  return ExpertStack(std::move(gate_up), std::move(down));
}

void ExpertStack::forward(int64_t j, const float* x, int64_t rows, float* y,
                          ThreadPool& pool) const {
  DI_CHECK(j >= 0 && j < count(), "expert ", j, " outside the ", count(), " local experts");
  if (rows == 0) return;
  const int64_t h = hidden();
  const int64_t i = intermediate();
  std::vector<float> act(static_cast<size_t>(rows * i));
  if (fp8_.block_rows > 0) {
    const auto weight = [&](const Tensor& stack, const Tensor& scales) {
      return kernels::Fp8Weight{reinterpret_cast<const uint8_t*>(expert_matrix(stack, j)),
                                scales.data<float>() + j * scales.dim(1) * scales.dim(2),
                                fp8_.block_rows, fp8_.block_cols};
    };
    std::vector<float> up(act.size());
    kernels::linear_fp8(x, rows, h, weight(gate_, fp8_.gate), i, nullptr, act.data(), pool);
    kernels::linear_fp8(x, rows, h, weight(up_, fp8_.up), i, nullptr, up.data(), pool);
    kernels::silu_mul(act.data(), up.data(), act.data(), rows * i);
    kernels::linear_fp8(act.data(), rows, i, weight(down_, fp8_.down), h, nullptr, y, pool);
    return;
  }
  if (gate_up_.defined()) {
    std::vector<float> gu(static_cast<size_t>(rows * 2 * i));
    kernels::linear(x, rows, h, expert_matrix(gate_up_, j), gate_up_.dtype(), 2 * i, nullptr,
                    gu.data(), pool);
    // Row r of gu holds [gate | up]; silu(gate) * up goes to a compact [rows, I] buffer.
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = gu.data() + r * 2 * i;
      kernels::silu_mul(row, row + i, act.data() + r * i, i);
    }
  } else {
    std::vector<float> up(act.size());
    kernels::linear(x, rows, h, expert_matrix(gate_, j), gate_.dtype(), i, nullptr, act.data(),
                    pool);
    kernels::linear(x, rows, h, expert_matrix(up_, j), up_.dtype(), i, nullptr, up.data(), pool);
    kernels::silu_mul(act.data(), up.data(), act.data(), rows * i);
  }
  kernels::linear(act.data(), rows, i, expert_matrix(down_, j), down_.dtype(), h, nullptr, y, pool);
}

}  // namespace deepinfer::model
