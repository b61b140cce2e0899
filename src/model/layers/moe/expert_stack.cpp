#include "model/layers/moe/expert_stack.h"

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
