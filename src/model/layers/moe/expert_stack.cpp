#include "model/layers/moe/expert_stack.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"

namespace deepinfer::model {
namespace {

// Copies `src` (converted to dst's dtype if needed) into dst's rows [row, row + src rows) of
// stacked expert j.
void copy_into(const Tensor& dst, int64_t j, int64_t row, const Tensor& src) {
  const Tensor converted = src.to(dst.dtype());
  const size_t row_bytes = static_cast<size_t>(dst.dim(2)) * dtype_size(dst.dtype());
  std::byte* base =
      static_cast<std::byte*>(dst.raw()) + static_cast<size_t>(j * dst.dim(1) + row) * row_bytes;
  std::memcpy(base, converted.raw(), converted.nbytes());
}

// Experts are sliced and stacked by element; block-quantized experts are not supported yet.
void refuse_blocks(const Tensor& t, const std::string& where) {
  DI_CHECK(!is_block_dtype(t.dtype()), where, ": ", t.describe(),
           ": MoE experts in block-quantized types are not supported yet (they run in f32, "
           "bf16 or f16); load the model with --dtype f32 or --dtype bf16");
}

}  // namespace

ExpertStack::ExpertStack(Tensor gate_up, Tensor down)
    : gate_up_(std::move(gate_up)), down_(std::move(down)) {
  refuse_blocks(gate_up_, "expert stack");
  DI_CHECK(gate_up_.ndim() == 3 && down_.ndim() == 3 && gate_up_.dim(0) == down_.dim(0) &&
               gate_up_.dim(1) == 2 * down_.dim(2) && gate_up_.dim(2) == down_.dim(1) &&
               gate_up_.dtype() == down_.dtype() && gate_up_.is_contiguous() &&
               down_.is_contiguous(),
           "expert stacks must be contiguous gate_up [E, 2I, H] and down [E, H, I] of one dtype, "
           "got ",
           gate_up_.describe(), " and ", down_.describe());
}

ExpertStack ExpertStack::load(WeightLoader& weights, const std::string& prefix, int64_t num_experts,
                              int64_t first, int64_t count, int64_t hidden, int64_t intermediate,
                              const TensorSplit& split) {
  DI_CHECK(first >= 0 && count > 0 && first + count <= num_experts, prefix, ": experts [", first,
           ", ", first + count, ") outside the layer's ", num_experts, " experts");
  std::vector<int64_t> ids(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) ids[static_cast<size_t>(j)] = first + j;
  return load(weights, prefix, num_experts, ids, hidden, intermediate, split);
}

ExpertStack ExpertStack::load(WeightLoader& weights, const std::string& prefix, int64_t num_experts,
                              std::span<const int64_t> ids, int64_t hidden, int64_t intermediate,
                              const TensorSplit& split) {
  const auto count = static_cast<int64_t>(ids.size());
  DI_CHECK(count > 0, prefix, ": no experts to load");
  bool run = true;  // ids are first, first + 1, ...: the fused tensors slice without a copy
  for (int64_t j = 0; j < count; ++j) {
    DI_CHECK(ids[j] >= 0 && ids[j] < num_experts, prefix, ": expert ", ids[j],
             " outside the layer's ", num_experts, " experts");
    run = run && ids[j] == ids[0] + j;
  }
  const int64_t full = intermediate;
  const auto [i0, i1] = split.part(full, prefix + "'s moe_intermediate_size");
  const int64_t i = i1 - i0;  // this rank's
  if (weights.has(prefix + ".gate_up_proj")) {
    DI_CHECK(!split.split(), prefix,
             ".gate_up_proj: fused 3-D expert tensors cannot be split over a moe tensor group of ",
             split.size, " yet; use expert parallelism (--enable-expert-parallel)");
    const Tensor gate_up =
        weights.matrix(prefix + ".gate_up_proj", {num_experts, 2 * i, hidden}, MatrixUse::expert);
    const Tensor down =
        weights.matrix(prefix + ".down_proj", {num_experts, hidden, i}, MatrixUse::expert);
    refuse_blocks(gate_up, prefix + ".gate_up_proj");
    if (run) {
      return ExpertStack(gate_up.slice_rows(ids[0], ids[0] + count),
                         down.slice_rows(ids[0], ids[0] + count));
    }
    // A placement (EPLB) that is not one run of experts: copy each into new stacks.
    ExpertStack stack(gate_up.slice_rows(ids[0], ids[0] + 1), down.slice_rows(ids[0], ids[0] + 1));
    ExpertStack out = stack.empty_like(count);
    for (int64_t j = 0; j < count; ++j) {
      const ExpertStack one(gate_up.slice_rows(ids[j], ids[j] + 1),
                            down.slice_rows(ids[j], ids[j] + 1));
      for (int part = 0; part < 2; ++part) {
        const auto from = one.expert_bytes(0, part);
        std::memcpy(out.mutable_expert_bytes(j, part).data(), from.data(), from.size());
      }
    }
    return out;
  }
  auto name = [&](int64_t e, const char* proj) {
    return prefix + "." + std::to_string(e) + "." + proj + ".weight";
  };
  // Other ranks' experts (expert parallelism) are theirs to read: not "unused" here.
  std::vector<char> mine(static_cast<size_t>(num_experts), 0);
  for (const int64_t e : ids) mine[static_cast<size_t>(e)] = 1;
  for (int64_t e = 0; e < num_experts; ++e) {
    if (mine[static_cast<size_t>(e)]) continue;
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      weights.skip(name(e, proj));
      weights.skip(name(e, proj) + "_scale_inv");
    }
  }
  Tensor gate_up, down;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t e = ids[j];
    // Unsplit: no slice (the whole tensor, zero-copy where the dtype allows).
    const auto part = [&](int dim) {
      return split.split() ? std::optional<Slice>(Slice{dim, i0, i1}) : std::nullopt;
    };
    const Tensor gate =
        weights.matrix(name(e, "gate_proj"), {full, hidden}, MatrixUse::expert, part(0));
    refuse_blocks(gate, name(e, "gate_proj"));
    const Tensor up =
        weights.matrix(name(e, "up_proj"), {full, hidden}, MatrixUse::expert, part(0));
    const Tensor dn =
        weights.matrix(name(e, "down_proj"), {hidden, full}, MatrixUse::expert, part(1));
    if (j == 0) {  // the stacks take the compute dtype the loader gives the first expert
      gate_up = Tensor::zeros({count, 2 * i, hidden}, gate.dtype());
      down = Tensor::zeros({count, hidden, i}, gate.dtype());
    }
    copy_into(gate_up, j, 0, gate);
    copy_into(gate_up, j, i, up);
    copy_into(down, j, 0, dn);
  }
  return ExpertStack(std::move(gate_up), std::move(down));
}

ExpertStack ExpertStack::empty_like(int64_t count) const {
  DI_CHECK(count > 0 && this->count() > 0, "expert stack: empty_like(", count, ") of ",
           this->count(), " experts");
  return ExpertStack(Tensor::zeros({count, gate_up_.dim(1), gate_up_.dim(2)}, dtype()),
                     Tensor::zeros({count, down_.dim(1), down_.dim(2)}, dtype()));
}

std::span<const std::byte> ExpertStack::expert_bytes(int64_t j, int part) const {
  DI_CHECK(j >= 0 && j < count() && (part == 0 || part == 1), "expert stack: expert ", j, " part ",
           part, " outside the ", count(), " local experts");
  const Tensor& t = part == 0 ? gate_up_ : down_;
  const size_t each = t.nbytes() / static_cast<size_t>(count());
  return {static_cast<const std::byte*>(t.raw()) + static_cast<size_t>(j) * each, each};
}

std::span<std::byte> ExpertStack::mutable_expert_bytes(int64_t j, int part) {
  const auto bytes = expert_bytes(j, part);
  return {const_cast<std::byte*>(bytes.data()), bytes.size()};
}

void ExpertStack::forward(int64_t j, const float* x, int64_t rows, float* y,
                          ThreadPool& pool) const {
  DI_CHECK(j >= 0 && j < count(), "expert ", j, " outside the ", count(), " local experts");
  if (rows == 0) return;
  const int64_t h = hidden();
  const int64_t i = intermediate();
  const size_t elem = dtype_size(dtype());
  const auto* gate_up =
      static_cast<const std::byte*>(gate_up_.raw()) + static_cast<size_t>(j * 2 * i * h) * elem;
  const auto* down =
      static_cast<const std::byte*>(down_.raw()) + static_cast<size_t>(j * h * i) * elem;
  std::vector<float> gu(static_cast<size_t>(rows * 2 * i));
  kernels::linear(x, rows, h, gate_up, dtype(), 2 * i, nullptr, gu.data(), pool);
  // Row r of gu holds [gate | up]; silu(gate) * up goes to a compact [rows, I] buffer.
  std::vector<float> act(static_cast<size_t>(rows * i));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = gu.data() + r * 2 * i;
    kernels::silu_mul(row, row + i, act.data() + r * i, i);
  }
  kernels::linear(act.data(), rows, i, down, dtype(), h, nullptr, y, pool);
}

}  // namespace deepinfer::model
