#include "model/layers/moe/expert_stack.h"

#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/scratch.h"
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

ExpertStack::ExpertStack(Tensor gate_up, Tensor down, RowScales scales)
    : ExpertStack(std::move(gate_up), std::move(down)) {
  w8a8_ = std::move(scales);
  check_row_scales();
}

ExpertStack::ExpertStack(Tensor gate, Tensor up, Tensor down, RowScales scales)
    : ExpertStack(std::move(gate), std::move(up), std::move(down)) {
  w8a8_ = std::move(scales);
  check_row_scales();
}

void ExpertStack::check_row_scales() const {
  const auto fits = [](const Tensor& scale, const Tensor& stack) {
    return stack.dtype() == DType::i8 && scale.dtype() == DType::f32 &&
           stack_of(scale, stack.dim(0), stack.dim(1), 1);
  };
  const bool ok = fits(w8a8_.down, down_) &&
                  (gate_up_.defined() ? fits(w8a8_.gate_up, gate_up_)
                                      : fits(w8a8_.gate, gate_) && fits(w8a8_.up, up_));
  DI_CHECK(ok,
           "W8A8 expert stacks need i8 gate_up (or gate and up) and down with f32 row "
           "scales [experts, rows, 1] each, got ",
           (gate_up_.defined() ? gate_up_ : gate_).describe(), " / ", down_.describe(),
           " with scales ", (gate_up_.defined() ? w8a8_.gate_up : w8a8_.gate).describe(), " / ",
           w8a8_.down.describe());
}

namespace {

// The row scales of an i8 matrix or stack the loader returned, as a stack [count, rows, 1].
Tensor row_scales(const WeightLoader& weights, const std::string& name, int64_t count,
                  int64_t rows) {
  return weights.w8a8_scale(name).reshape({count, rows, 1});
}

// The FP8 matrix of expert `e`'s projection `proj` ("gate_proj", "up_proj", "down_proj") of
// shape `shape`, its block scales then at WeightLoader::fp8_scale under `name(e, proj)`.
using Fp8Expert = std::function<Tensor(int64_t e, const char* proj, const Shape& shape)>;

// Experts `ids` in FP8 (an FP8 checkpoint kept as stored, or --quantization fp8 of a 16-bit
// one): per-expert matrices and their scales copied into stacks (gate / up / down apart: a
// fused gate_up would need I to be whole scale blocks).
ExpertStack load_fp8(WeightLoader& weights,
                     const std::function<std::string(int64_t, const char*)>& name,
                     const Fp8Expert& matrix, std::span<const int64_t> ids, int64_t hidden,
                     int64_t i) {
  io::Fp8BlockQuantization block;
  const auto count = static_cast<int64_t>(ids.size());
  Tensor stacks[3], scales[3];
  const char* projs[3] = {"gate_proj", "up_proj", "down_proj"};
  for (int p = 0; p < 3; ++p) {
    const Shape shape = p < 2 ? Shape{i, hidden} : Shape{hidden, i};
    for (int64_t j = 0; j < count; ++j) {
      const std::string n = name(ids[j], projs[p]);
      const Tensor w = matrix(ids[j], projs[p], shape);
      DI_CHECK(w.dtype() == DType::f8_e4m3, n, ": ", w.describe(),
               " among FP8 experts (one expert's projections must share one dtype)");
      const WeightLoader::Fp8Scales& fp8 = weights.fp8_scale(n);
      const Tensor& s = fp8.scale;
      DI_CHECK((p == 0 && j == 0) || (fp8.block.block_rows == block.block_rows &&
                                      fp8.block.block_cols == block.block_cols),
               n, ": FP8 experts of one layer must share one block size");
      block = fp8.block;
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

// Rows [row, row + rows) of expert `e` of a stored [experts, R, cols] stack (holding experts
// [first, ...)), as a 2-D view.
Tensor expert_rows(const Tensor& stack, int64_t first, int64_t e, int64_t row, int64_t rows) {
  const int64_t per = stack.dim(1);
  const int64_t at = (e - first) * per + row;
  return stack.reshape({stack.dim(0) * per, stack.dim(2)}).slice_rows(at, at + rows);
}

// A 16-bit checkpoint's fused stacks under --quantization fp8: each expert's gate, up and down
// cut out of them and quantized as the same experts stored one matrix each would be (bitwise
// the same FP8 bytes and scales), which is also how a converter then writes them.
// (A GGUF file may hold some of its stacks in a block type: those keep it, as they would
// stored per expert.)
bool quantizes_stacks_to_fp8(const WeightLoader& weights, const std::string& prefix,
                             std::initializer_list<const char*> stacks) {
  if (!weights.quantizes_to_fp8()) return false;
  for (const char* stack : stacks) {
    if (!weights.has(prefix + stack)) return false;  // refused below, naming it
    const DType stored = weights.checkpoint().info(prefix + stack).dtype;
    if (stored != DType::f32 && stored != DType::bf16 && stored != DType::f16) return false;
  }
  return true;
}

}  // namespace

ExpertStack ExpertStack::load(WeightLoader& weights, const std::string& prefix, int64_t num_experts,
                              int64_t first, int64_t count, int64_t hidden, int64_t intermediate,
                              const TensorSplit& split, const ExpertNames& names) {
  DI_CHECK(first >= 0 && count > 0 && first + count <= num_experts, prefix, ": experts [", first,
           ", ", first + count, ") outside the layer's ", num_experts, " experts");
  std::vector<int64_t> ids(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) ids[static_cast<size_t>(j)] = first + j;
  return load(weights, prefix, num_experts, ids, hidden, intermediate, split, names);
}

ExpertStack ExpertStack::load(WeightLoader& weights, const std::string& prefix, int64_t num_experts,
                              std::span<const int64_t> ids, int64_t hidden, int64_t intermediate,
                              const TensorSplit& split, const ExpertNames& names) {
  const auto count = static_cast<int64_t>(ids.size());
  DI_CHECK(count > 0, prefix, ": no experts to load");
  bool run = true;  // ids are first, first + 1, ...: whole-layer stacks slice without a copy
  std::vector<char> mine(static_cast<size_t>(num_experts), 0);
  for (int64_t j = 0; j < count; ++j) {
    DI_CHECK(ids[j] >= 0 && ids[j] < num_experts, prefix, ": expert ", ids[j],
             " outside the layer's ", num_experts, " experts");
    run = run && ids[j] == ids[0] + j;
    mine[static_cast<size_t>(ids[j])] = 1;
  }
  const int64_t full = intermediate;
  // Plain variables, not a structured binding: the lambdas below capture them (clang < 16
  // refuses to capture bindings).
  const auto range = split.part(full, prefix + "'s moe_intermediate_size");
  const int64_t i0 = range.first, i1 = range.second;
  const int64_t i = i1 - i0;  // this rank's
  // `proj` is the projection's role ("gate_proj", "up_proj", "down_proj"); the checkpoint may
  // store it under another name (ExpertNames).
  auto name = [&](int64_t e, const char* proj) {
    return prefix + "." + std::to_string(e) + "." + names.stored(proj) + ".weight";
  };
  // Other ranks' experts (expert parallelism) are theirs to read: not "unused" here. A GGUF file
  // names each expert too (as views of its stacks): those are not unused either when the
  // stacks are read whole.
  const auto skip_experts = [&](bool local_too) {
    for (int64_t e = 0; e < num_experts; ++e) {
      if (!local_too && mine[static_cast<size_t>(e)]) continue;
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        weights.skip(name(e, proj));
        weights.skip(name(e, proj) + "_scale_inv");
        weights.skip(name(e, proj) + "_scale");  // W8A8 checkpoints' row scales
      }
    }
  };
  // This rank's experts of a whole-layer stack: one run of ids is a view; a placement that is
  // not one run (EPLB) copies each expert's bytes.
  const auto local = [&](const Tensor& stack) {
    if (run) return stack.slice_rows(ids[0], ids[0] + count);
    Tensor out = Tensor::zeros({count, stack.dim(1), stack.dim(2)}, stack.dtype());
    const size_t each = expert_matrix_bytes(stack);
    for (int64_t j = 0; j < count; ++j) {
      std::memcpy(static_cast<std::byte*>(out.raw()) + static_cast<size_t>(j) * each,
                  expert_matrix(stack, ids[j]), each);
    }
    return out;
  };
  if (weights.has(prefix + ".gate_up_proj")) {
    DI_CHECK(!split.split(), prefix,
             ".gate_up_proj: fused 3-D expert tensors cannot be split over a moe tensor group of ",
             split.size, " yet; use expert parallelism (--enable-expert-parallel)");
    skip_experts(true);
    const Shape gate_up_shape{num_experts, 2 * i, hidden}, down_shape{num_experts, hidden, i};
    if (quantizes_stacks_to_fp8(weights, prefix, {".gate_up_proj", ".down_proj"})) {
      // This run's rows (a shard may hold only them), every row for any other placement.
      const int64_t first = run ? ids[0] : 0, end = run ? ids[0] + count : num_experts;
      const Tensor gate_up =
          weights.stored_stack_rows(prefix + ".gate_up_proj", gate_up_shape, first, end);
      const Tensor down = weights.stored_stack_rows(prefix + ".down_proj", down_shape, first, end);
      const Fp8Expert fused = [&](int64_t e, const char* proj, const Shape& shape) {
        const bool is_down = proj == std::string_view("down_proj");
        const int64_t row = proj == std::string_view("up_proj") ? i : 0;
        return weights.quantize_fp8_expert(
            name(e, proj), expert_rows(is_down ? down : gate_up, first, e, row, shape[0]));
      };
      ExpertStack stack = load_fp8(weights, name, fused, ids, hidden, i);
      // Quantized copies run: the mapped 16-bit stacks need not stay resident.
      gate_up.release_pages();
      down.release_pages();
      return stack;
    }
    if (run) {
      // Just this run's rows (a converted per-rank shard may hold only them), recorded as the
      // stacks this rank holds (deepinfer convert).
      const Tensor gate_up = weights.matrix_rows(prefix + ".gate_up_proj", gate_up_shape, ids[0],
                                                 ids[0] + count, MatrixUse::expert);
      const Tensor down = weights.matrix_rows(prefix + ".down_proj", down_shape, ids[0],
                                              ids[0] + count, MatrixUse::expert);
      if (gate_up.dtype() == DType::i8) {
        const Tensor gu_scale = row_scales(weights, prefix + ".gate_up_proj", count, 2 * i);
        const Tensor dn_scale = row_scales(weights, prefix + ".down_proj", count, hidden);
        weights.record_expert_stack(prefix, num_experts, ids[0], gate_up, down, gu_scale, dn_scale);
        return ExpertStack(gate_up, down, RowScales{gu_scale, {}, {}, dn_scale});
      }
      weights.record_expert_stack(prefix, num_experts, ids[0], gate_up, down);
      return ExpertStack(gate_up, down);
    }
    // Any other placement (EPLB): every row (a shard of a run refuses clearly), each expert
    // copied into new stacks; nothing recorded (convert writes runs only).
    const Tensor gate_up = weights.matrix_rows(prefix + ".gate_up_proj", gate_up_shape, 0,
                                               num_experts, MatrixUse::expert);
    const Tensor down =
        weights.matrix_rows(prefix + ".down_proj", down_shape, 0, num_experts, MatrixUse::expert);
    if (gate_up.dtype() == DType::i8) {
      return ExpertStack(
          local(gate_up), local(down),
          RowScales{local(row_scales(weights, prefix + ".gate_up_proj", num_experts, 2 * i)),
                    {},
                    {},
                    local(row_scales(weights, prefix + ".down_proj", num_experts, hidden))});
    }
    return ExpertStack(local(gate_up), local(down));
  }
  // Split over a moe tensor group, a GGUF file's per-expert views are read instead of its
  // whole-layer stacks (a slice of each expert is a slice of one matrix).
  const bool per_expert_split = split.split() && weights.has(name(ids[0], "gate_proj"));
  if (weights.has(prefix + ".gate_proj") && weights.has(prefix + ".up_proj") && !per_expert_split) {
    DI_CHECK(!split.split(), prefix,
             ".gate_proj: 3-D expert tensors cannot be split over a moe tensor group of ",
             split.size, " yet; use expert parallelism (--enable-expert-parallel)");
    if (quantizes_stacks_to_fp8(weights, prefix, {".gate_proj", ".up_proj", ".down_proj"})) {
      skip_experts(true);
      const Shape gate_shape{num_experts, i, hidden}, down_shape{num_experts, hidden, i};
      const Tensor stacks[3] = {
          weights.stored_stack_rows(prefix + ".gate_proj", gate_shape, 0, num_experts),
          weights.stored_stack_rows(prefix + ".up_proj", gate_shape, 0, num_experts),
          weights.stored_stack_rows(prefix + ".down_proj", down_shape, 0, num_experts)};
      const Fp8Expert split_stacks = [&](int64_t e, const char* proj, const Shape& shape) {
        const int p = proj == std::string_view("gate_proj") ? 0
                      : proj == std::string_view("up_proj") ? 1
                                                            : 2;
        return weights.quantize_fp8_expert(name(e, proj),
                                           expert_rows(stacks[p], 0, e, 0, shape[0]));
      };
      ExpertStack stack = load_fp8(weights, name, split_stacks, ids, hidden, i);
      for (const Tensor& t : stacks) t.release_pages();
      return stack;
    }
    const Tensor gate =
        weights.matrix(prefix + ".gate_proj", {num_experts, i, hidden}, MatrixUse::expert);
    const Tensor up =
        weights.matrix(prefix + ".up_proj", {num_experts, i, hidden}, MatrixUse::expert);
    const Tensor down =
        weights.matrix(prefix + ".down_proj", {num_experts, hidden, i}, MatrixUse::expert);
    skip_experts(true);
    if (gate.dtype() == DType::i8 && up.dtype() == DType::i8 && down.dtype() == DType::i8) {
      return ExpertStack(
          local(gate), local(up), local(down),
          RowScales{{},
                    local(row_scales(weights, prefix + ".gate_proj", num_experts, i)),
                    local(row_scales(weights, prefix + ".up_proj", num_experts, i)),
                    local(row_scales(weights, prefix + ".down_proj", num_experts, hidden))});
    }
    if (gate.dtype() == up.dtype()) return ExpertStack(local(gate), local(up), local(down));
    // A file may store gate and up in different types; one dtype per pair keeps the kernels
    // simple, and f32 holds both exactly.
    return ExpertStack(local(gate.to(DType::f32)), local(up.to(DType::f32)), local(down));
  }
  skip_experts(false);
  if (per_expert_split) {
    for (const char* proj : {".gate_proj", ".up_proj", ".down_proj"}) weights.skip(prefix + proj);
  }
  // One expert's matrix as WeightLoader::matrix gives it: under a moe tensor group this rank's
  // rows of gate / up and columns of down (FP8 then quantized per slice, as dense layers are).
  const Fp8Expert per_expert_fp8 = [&](int64_t e, const char* proj, const Shape&) {
    const bool is_down = proj == std::string_view("down_proj");
    const Shape whole = is_down ? Shape{hidden, full} : Shape{full, hidden};
    const std::optional<Slice> slice =
        split.split() ? std::optional<Slice>(Slice{is_down ? 1 : 0, i0, i1}) : std::nullopt;
    return weights.matrix(name(e, proj), whole, MatrixUse::expert, slice);
  };
  const DType stored = weights.has(name(ids[0], "gate_proj"))
                           ? weights.checkpoint().info(name(ids[0], "gate_proj")).dtype
                           : DType::f32;
  // FP8 stacks: an FP8 checkpoint kept as stored (no --dtype / --quantization; split over a moe
  // tensor group, each expert's part is widened instead, WeightLoader::matrix, unless it can
  // stay FP8: below), or --quantization fp8 of a 16-bit, int8 (dequantized first) or FP8 one.
  // A split keeps FP8 where the checkpoint is a converted shard holding this rank's parts
  // already, or where the parts fall on block bounds (gate / up rows, down columns).
  const bool shard_parts = weights.has(name(ids[0], "gate_proj")) &&
                           weights.checkpoint().slice(name(ids[0], "gate_proj")).has_value();
  const bool on_blocks = weights.fp8_slice_on_blocks({full, hidden}, Slice{0, i0, i1}) &&
                         weights.fp8_slice_on_blocks({hidden, full}, Slice{1, i0, i1});
  const bool kept_fp8 = weights.fp8() && stored == DType::f8_e4m3 &&
                        weights.keeps_fp8(MatrixUse::expert) &&
                        (!split.split() || shard_parts || on_blocks);
  const bool to_fp8 = weights.quantizes_to_fp8() &&
                      (stored == DType::f32 || stored == DType::bf16 || stored == DType::f16 ||
                       stored == DType::i8 || stored == DType::f8_e4m3);
  if (kept_fp8 || to_fp8) return load_fp8(weights, name, per_expert_fp8, ids, hidden, i);
  Tensor gate_up, down, gate_up_scale, down_scale;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t e = ids[j];
    // Unsplit: no slice (the whole tensor, zero-copy where the dtype allows).
    const auto part = [&](int dim) {
      return split.split() ? std::optional<Slice>(Slice{dim, i0, i1}) : std::nullopt;
    };
    Tensor gate = weights.matrix(name(e, "gate_proj"), {full, hidden}, MatrixUse::expert, part(0));
    Tensor up = weights.matrix(name(e, "up_proj"), {full, hidden}, MatrixUse::expert, part(0));
    const Tensor dn =
        weights.matrix(name(e, "down_proj"), {hidden, full}, MatrixUse::expert, part(1));
    const bool w8a8 =
        gate.dtype() == DType::i8 && up.dtype() == DType::i8 && dn.dtype() == DType::i8;
    DI_CHECK(
        w8a8 || (gate.dtype() != DType::i8 && up.dtype() != DType::i8 && dn.dtype() != DType::i8),
        name(e, "gate_proj"), ": an expert's projections are all int8 (W8A8) or none");
    if (gate.dtype() != up.dtype()) {
      gate = gate.to(DType::f32);
      up = up.to(DType::f32);
    }
    if (j == 0) {  // the stacks take the dtypes the loader gives the first expert
      gate_up = Tensor::zeros({count, 2 * i, hidden}, gate.dtype());
      down = Tensor::zeros({count, hidden, i}, dn.dtype());
      if (w8a8) {
        gate_up_scale = Tensor::zeros({count, 2 * i, 1}, DType::f32);
        down_scale = Tensor::zeros({count, hidden, 1}, DType::f32);
      }
    }
    DI_CHECK(w8a8 == gate_up_scale.defined(), name(e, "gate_proj"),
             ": int8 (W8A8) and other experts in one layer");
    copy_into_expert(gate_up, j, 0, gate, name(e, "gate_proj"));
    copy_into_expert(gate_up, j, i, up, name(e, "up_proj"));
    copy_into_expert(down, j, 0, dn, name(e, "down_proj"));
    // Copied: the stack is what runs, so the mapped per-expert bytes need not stay resident.
    gate.release_pages();
    up.release_pages();
    dn.release_pages();
    if (w8a8) {
      const auto scale = [&](const char* proj, int64_t rows) {
        return weights.w8a8_scale(name(e, proj)).reshape({rows, 1});
      };
      copy_into_expert(gate_up_scale, j, 0, scale("gate_proj", i), name(e, "gate_proj") + "_scale");
      copy_into_expert(gate_up_scale, j, i, scale("up_proj", i), name(e, "up_proj") + "_scale");
      copy_into_expert(down_scale, j, 0, scale("down_proj", hidden),
                       name(e, "down_proj") + "_scale");
    }
  }
  // Split over a moe tensor group the stacks hold part of each expert's intermediate, not rows
  // of a fused [E, 2I, H] tensor: deepinfer convert then writes the per-expert slices recorded
  // above (a fused stack could not be split when loaded back).
  if (run && !split.split()) {
    weights.record_expert_stack(prefix, num_experts, ids[0], gate_up, down, gate_up_scale,
                                down_scale);
  }
  if (gate_up_scale.defined()) {
    return ExpertStack(std::move(gate_up), std::move(down),
                       RowScales{gate_up_scale, {}, {}, down_scale});
  }
  return ExpertStack(std::move(gate_up), std::move(down));
}

std::vector<const Tensor*> ExpertStack::part_tensors() const {
  std::vector<const Tensor*> parts;
  if (gate_up_.defined()) {
    parts.push_back(&gate_up_);
  } else {
    parts.push_back(&gate_);
    parts.push_back(&up_);
  }
  parts.push_back(&down_);
  if (fp8_.block_rows > 0) {
    for (const Tensor* scale : {&fp8_.gate, &fp8_.up, &fp8_.down}) parts.push_back(scale);
  }
  // W8A8 row scales travel with their experts (EPLB moves every part).
  for (const Tensor* scale : {&w8a8_.gate_up, &w8a8_.gate, &w8a8_.up, &w8a8_.down}) {
    if (scale->defined()) parts.push_back(scale);
  }
  return parts;
}

void ExpertStack::release_pages() const {
  for (const Tensor* t : part_tensors()) t->release_pages();
}

int ExpertStack::parts() const {
  return static_cast<int>(part_tensors().size());
}

ExpertStack ExpertStack::empty_like(int64_t count) const {
  DI_CHECK(count > 0 && this->count() > 0, "expert stack: empty_like(", count, ") of ",
           this->count(), " experts");
  const auto zeros = [&](const Tensor& t) {
    return Tensor::zeros({count, t.dim(1), t.dim(2)}, t.dtype());
  };
  if (fp8_.block_rows > 0) {
    return ExpertStack(
        zeros(gate_), zeros(up_), zeros(down_),
        {zeros(fp8_.gate), zeros(fp8_.up), zeros(fp8_.down), fp8_.block_rows, fp8_.block_cols});
  }
  if (w8a8()) {
    const auto scales = [&](const Tensor& t) { return t.defined() ? zeros(t) : Tensor(); };
    const RowScales fresh{scales(w8a8_.gate_up), scales(w8a8_.gate), scales(w8a8_.up),
                          scales(w8a8_.down)};
    if (gate_up_.defined()) return ExpertStack(zeros(gate_up_), zeros(down_), fresh);
    return ExpertStack(zeros(gate_), zeros(up_), zeros(down_), fresh);
  }
  if (gate_up_.defined()) return ExpertStack(zeros(gate_up_), zeros(down_));
  return ExpertStack(zeros(gate_), zeros(up_), zeros(down_));
}

std::span<const std::byte> ExpertStack::expert_bytes(int64_t j, int part) const {
  const std::vector<const Tensor*> all = part_tensors();
  DI_CHECK(j >= 0 && j < count() && part >= 0 && part < static_cast<int>(all.size()),
           "expert stack: expert ", j, " part ", part, " outside the ", count(),
           " local experts of ", all.size(), " parts");
  const Tensor& t = *all[static_cast<size_t>(part)];
  return {expert_matrix(t, j), expert_matrix_bytes(t)};
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
  ScratchFloats act(static_cast<size_t>(rows * i));
  if (fp8_.block_rows > 0) {
    const auto weight = [&](const Tensor& stack, const Tensor& scales) {
      return kernels::Fp8Weight{reinterpret_cast<const uint8_t*>(expert_matrix(stack, j)),
                                scales.data<float>() + j * scales.dim(1) * scales.dim(2),
                                fp8_.block_rows, fp8_.block_cols};
    };
    auto up = ScratchFloats::uninitialized(act.size());
    kernels::linear_fp8(x, rows, h, weight(gate_, fp8_.gate), i, nullptr, act.data(), pool);
    kernels::linear_fp8(x, rows, h, weight(up_, fp8_.up), i, nullptr, up.data(), pool);
    kernels::silu_mul(act.data(), up.data(), act.data(), rows * i);
    kernels::linear_fp8(act.data(), rows, i, weight(down_, fp8_.down), h, nullptr, y, pool);
    return;
  }
  // One projection of expert j: W8A8 (per-token int8 activations) or any kernels::linear type.
  const auto project = [&](const Tensor& stack, const Tensor& scales, const float* in, int64_t k,
                           int64_t n, float* out) {
    if (stack.dtype() == DType::i8) {
      kernels::linear_w8a8(in, rows, k, reinterpret_cast<const int8_t*>(expert_matrix(stack, j)),
                           scales.data<float>() + j * n, n, nullptr, out, pool);
    } else {
      kernels::linear(in, rows, k, expert_matrix(stack, j), stack.dtype(), n, nullptr, out, pool);
    }
  };
  if (gate_up_.defined()) {
    auto gu = ScratchFloats::uninitialized(static_cast<size_t>(rows * 2 * i));
    project(gate_up_, w8a8_.gate_up, x, h, 2 * i, gu.data());
    // Row r of gu holds [gate | up]; silu(gate) * up goes to a compact [rows, I] buffer.
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = gu.data() + r * 2 * i;
      kernels::silu_mul(row, row + i, act.data() + r * i, i);
    }
  } else {
    auto up = ScratchFloats::uninitialized(act.size());
    project(gate_, w8a8_.gate, x, h, i, act.data());
    project(up_, w8a8_.up, x, h, i, up.data());
    kernels::silu_mul(act.data(), up.data(), act.data(), rows * i);
  }
  project(down_, w8a8_.down, act.data(), i, h, y);
}

void ExpertStack::forward_group(std::span<const ExpertRows> work, ThreadPool& pool) const {
  if (!is_block_dtype(dtype()) || !is_block_dtype(down_dtype())) {
    for (const ExpertRows& e : work) forward(e.expert, e.x, e.rows, e.y, pool);
    return;
  }
  const int64_t h = hidden();
  const int64_t i = intermediate();
  std::vector<int64_t> at(work.size() + 1, 0);  // each expert's first row in the buffers
  for (size_t g = 0; g < work.size(); ++g) {
    DI_CHECK(work[g].expert >= 0 && work[g].expert < count(), "expert ", work[g].expert,
             " outside the ", count(), " local experts");
    at[g + 1] = at[g] + work[g].rows;
  }
  if (at.back() == 0) return;
  ScratchFloats act(static_cast<size_t>(at.back() * i));
  std::vector<kernels::LinearJob> jobs;
  // A part's experts as repack_blocks() left them (rp) or as stored.
  const auto repacked = [](const kernels::PackedWeights& rp, const Tensor& stack) {
    return kernels::reads_repacked_blocks(rp) && rp.source() == stack.raw();
  };
  const auto matrix = [](const Tensor& stack, const kernels::PackedWeights& rp, bool read_rp,
                         int64_t j) -> const void* {
    if (!read_rp) return expert_matrix(stack, j);
    return static_cast<const std::byte*>(rp.panels()) + j * expert_matrix_bytes(stack);
  };
  const auto add_jobs = [&](const Tensor& stack, const kernels::PackedWeights& rp, bool read_rp,
                            const float* x, float* out, int64_t width) {
    for (size_t g = 0; g < work.size(); ++g) {
      const float* in = x ? x + at[g] * i : work[g].x;
      float* y = out ? out + at[g] * width : work[g].y;
      jobs.push_back({in, work[g].rows, matrix(stack, rp, read_rp, work[g].expert), y});
    }
  };
  if (gate_up_.defined()) {
    auto gu = ScratchFloats::uninitialized(static_cast<size_t>(at.back() * 2 * i));
    const bool rp = repacked(repacked_.gate_up, gate_up_);
    add_jobs(gate_up_, repacked_.gate_up, rp, nullptr, gu.data(), 2 * i);
    kernels::linear_grouped(jobs, h, gate_up_.dtype(), 2 * i, pool, rp);
    for (int64_t r = 0; r < at.back(); ++r) {
      const float* row = gu.data() + r * 2 * i;
      kernels::silu_mul(row, row + i, act.data() + r * i, i);
    }
  } else {
    auto up = ScratchFloats::uninitialized(act.size());
    const bool gate_rp = repacked(repacked_.gate, gate_), up_rp = repacked(repacked_.up, up_);
    add_jobs(gate_, repacked_.gate, gate_rp, nullptr, act.data(), i);
    if (up_.dtype() != gate_.dtype() || gate_rp != up_rp) {
      kernels::linear_grouped(jobs, h, gate_.dtype(), i, pool, gate_rp);
      jobs.clear();
    }
    add_jobs(up_, repacked_.up, up_rp, nullptr, up.data(), i);
    kernels::linear_grouped(jobs, h, up_.dtype(), i, pool, up_rp);
    // Expert by expert, as forward() does (the same elements in the same calls).
    for (size_t g = 0; g < work.size(); ++g) {
      float* a = act.data() + at[g] * i;
      kernels::silu_mul(a, up.data() + at[g] * i, a, work[g].rows * i);
    }
  }
  jobs.clear();
  const bool down_rp = repacked(repacked_.down, down_);
  add_jobs(down_, repacked_.down, down_rp, act.data(), nullptr, h);
  kernels::linear_grouped(jobs, i, down_.dtype(), h, pool, down_rp);
}

kernels::PackedWeights ExpertStack::repack_part(const Tensor& stack, bool huge_pages) {
  // repacks_blocks(): a block type with the repacked layout under this ISA.
  if (!stack.defined() || !kernels::repacks_blocks(stack.dtype()) ||
      stack.dim(1) % kernels::repacked_row_unit() != 0 || !stack.pages_releasable())
    return {};
  kernels::PackedWeights rp = kernels::pack_weights(
      stack.raw(), stack.dtype(), stack.dim(0) * stack.dim(1), stack.dim(2), huge_pages);
  if (rp.defined()) stack.release_pages();  // forward_group reads rp now
  return rp;
}

int ExpertStack::repacked_parts() const {
  int parts = 0;
  for (const auto* rp : {&repacked_.gate_up, &repacked_.gate, &repacked_.up, &repacked_.down})
    parts += rp->defined() ? 1 : 0;
  return parts;
}

void ExpertStack::repack_blocks(bool huge_pages) {
  repacked_ = {};
  // forward() (other stacks) reads the stored bytes: repacking them would only fault them back.
  if (count() == 0 || !is_block_dtype(dtype()) || !is_block_dtype(down_dtype())) return;
  repacked_ = {repack_part(gate_up_, huge_pages), repack_part(gate_, huge_pages),
               repack_part(up_, huge_pages), repack_part(down_, huge_pages)};
}

}  // namespace deepinfer::model
