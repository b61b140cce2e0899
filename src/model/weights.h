#pragma once
// Pulls named tensors out of a checkpoint with the shape the config implies, converting
// only when needed: matrices keep the stored dtype (zero-copy) unless a compute dtype is
// forced; small vectors (norms, biases) become f32.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/memory.h"
#include "core/tensor.h"
#include "io/fp8.h"
#include "io/safetensors.h"
#include "model/weight_quantization.h"
#include "parallel/eplb_state.h"
#include "parallel/moe_options.h"
#include "parallel/parallel_context.h"

namespace deepinfer::model {

struct LoadOptions {
  std::optional<DType> weight_dtype;  // nullopt: as stored (f32, bf16, f16 and the ggml block
                                      // types all run; FP8 projections stay FP8 with their
                                      // block scales, FP8 experts and kv_b are dequantized to
                                      // bf16); set: every matrix in this dtype
  // --quantization: projections stored in f32 / bf16 / f16 / FP8 are quantized to this block
  // type (or q4_k_m's mix) at load (model/weight_quantization.h); the rest follows
  // weight_dtype. (Initialized
  // so that the shorthand LoadOptions{DType::bf16} stays warning-free.)
  std::optional<Quantization> quantization = std::nullopt;
  // The process's parallel layout (parallel_context.h); null: one process. MoE builders take
  // their expert group's communicator from it and load only this rank's experts.
  std::shared_ptr<const parallel::ParallelContext> parallel = nullptr;
  // Pipeline parallelism: a step's sequences are split into this many micro-batches, which
  // travel the stages one after another so that the stages overlap (1: the whole step at once).
  int64_t num_micro_batches = 1;
  // MoE communication dtype, capacity factor and expert load balancing (moe_options.h).
  parallel::MoeOptions moe = {};
  // How the checkpoint's files are held: mapped or read (--no-mmap), mlock, huge pages.
  MemoryOptions memory = {};
  // enable_atb_attention (--enable-atb-attention): true runs the fused kernels (one-pass
  // residual add + RMSNorm, flash-style attention); false the unfused ones (add, then norm;
  // scores, softmax and weighted sum as separate passes), for A/B runs.
  bool fused_attention = true;
};

// What a matrix is for, which decides whether --quantization applies (docs/QUANTIZATION.md):
// only projections are quantized; the others keep the checkpoint's (or --dtype's) type.
enum class MatrixUse {
  projection,      // attention / MLP / shared-expert projections, run by kernels::linear
  embedding,       // token embeddings: rows are looked up
  tied_embedding,  // token embeddings that are the lm_head too (tie_word_embeddings): kept as
                   // an embedding is, quantized as the lm_head under --quantize-lm-head
  lm_head,         // the output projection: its rounding lands directly on the logits
  expert,          // routed MoE experts, one matrix or a stack [experts, rows, cols]: quantized as
                   // projections are (model/layers/moe/expert_stack.h runs every block type)
  by_element,      // read by element, not by kernels::linear (MLA's kv_b_proj, split per head)
};

// The part of a tensor one rank loads (tensor parallelism): elements [begin, end) along
// dimension `dim` of the stored tensor. Only whole rows (dim 0) or whole column ranges of the
// last dimension; a column range of a block-quantized matrix must be whole blocks. Every
// slice a layer takes goes through WeightLoader, so what leaves it is what this rank holds.
struct Slice {
  int dim = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// Sees every tensor as it leaves the loader, under its checkpoint name: a matrix as matrix()
// returns it (converted, quantized, sliced), a vector as stored (vector_f32's f32 copy of it is
// exact; a slice of it as sliced), and each MoE layer's expert stacks as ExpertStack holds
// them. `deepinfer convert` writes what it records (src/convert/), so a converted checkpoint
// holds what a load would.
class TensorRecorder {
 public:
  virtual ~TensorRecorder() = default;
  // `slice`: the tensor is elements [begin, end) along `dim` of the stored one (an expert run's
  // rows, a tensor-parallel rank's rows or columns); nullopt: all of it.
  virtual void record(const std::string& name, const Tensor& tensor, MatrixUse use,
                      std::optional<io::TensorSlice> slice) = 0;
  // The experts [first, first + count) of the layer under `prefix` ("model.layers.3.mlp.experts")
  // as stacked by ExpertStack: gate_up [count, 2I, H], down [count, H, I].
  // W8A8 stacks (i8) come with their f32 row scales gate_up_scale [count, 2I, 1] and
  // down_scale [count, H, 1]; other dtypes pass undefined tensors.
  virtual void record_expert_stack(const std::string& prefix, int64_t num_experts, int64_t first,
                                   const Tensor& gate_up, const Tensor& down,
                                   const Tensor& gate_up_scale, const Tensor& down_scale) = 0;
};

// Bytes of the weights a model holds after loading, by dtype name ("q8_0", "f32", ...).
using WeightBytes = std::map<std::string, int64_t>;
std::string describe_weight_bytes(const WeightBytes& bytes);  // "q8_0 1.2 MiB, f32 330.0 KiB"

class WeightLoader {
 public:
  WeightLoader(const io::Checkpoint& checkpoint, LoadOptions options);

  bool has(const std::string& name) const { return checkpoint_.contains(name); }
  // Block-wise FP8 announced by config.json (io::parse_fp8_quantization): F8_E4M3 matrices
  // are then dequantized at load with their `<name>_scale_inv` blocks.
  void set_fp8(std::optional<io::Fp8BlockQuantization> quant) { fp8_ = quant; }
  // A matrix for kernels::linear in the compute dtype; Error if missing or misshaped. Block
  // types (q8_0 / q4_0 / q4_1) stay as stored (zero-copy) unless a weight_dtype is forced
  // (and always with --quantization). A projection is quantized when --quantization asks and
  // its rows are whole blocks.
  // With `slice`, only that part (`expected` is still the stored, whole shape); an FP8 matrix
  // sliced so is widened rather than kept in FP8 (tensor parallelism keeps FP8 unsplit only).
  Tensor matrix(const std::string& name, const Shape& expected,
                MatrixUse use = MatrixUse::projection, std::optional<Slice> slice = std::nullopt);
  // Rows [begin, end) of the matrix `name` whose full shape is `full` (e.g. one rank's experts
  // of a fused [E, 2I, H] stack), as matrix() would give them: matrix() with a row slice (none
  // when the rows are all of them).
  Tensor matrix_rows(const std::string& name, const Shape& full, int64_t begin, int64_t end,
                     MatrixUse use);
  // Every tensor handed out from now on is also shown to `recorder` (null: none; not owned).
  void set_recorder(TensorRecorder* recorder) { recorder_ = recorder; }
  // ExpertStack reports the stacks it built (for the recorder).
  void record_expert_stack(const std::string& prefix, int64_t num_experts, int64_t first,
                           const Tensor& gate_up, const Tensor& down,
                           const Tensor& gate_up_scale = {}, const Tensor& down_scale = {}) {
    if (recorder_) {
      recorder_->record_expert_stack(prefix, num_experts, first, gate_up, down, gate_up_scale,
                                     down_scale);
    }
  }
  // --quantization fp8 of routed experts stored as fused 3-D stacks (<prefix>.gate_up_proj
  // [E, 2I, H] ...): rows [begin, end) of the stack `name` (whole shape `full`) as stored,
  // marked used but not recorded: what the model holds, and a converter writes, is the FP8
  // experts quantize_fp8_expert() makes of it.
  Tensor stored_stack_rows(const std::string& name, const Shape& full, int64_t begin, int64_t end);
  // One expert's [rows, cols] matrix (a view into such a stack) quantized to FP8 with 128x128
  // block scales exactly as matrix() quantizes it when the checkpoint stores it per expert,
  // under that per-expert `name` (<prefix>.<e>.gate_proj.weight): fp8_scale(name) gives its
  // scales, and the recorder sees it (and `<name>_scale_inv`) so, so a converted checkpoint
  // holds the experts one matrix each whichever way the source stored them.
  Tensor quantize_fp8_expert(const std::string& name, const Tensor& matrix);
  // The f32 block scales [ceil(rows / b), ceil(cols / b)] of an F8_E4M3 matrix that matrix()
  // returned as stored (FP8 checkpoints without --dtype / --quantization: projections and
  // lm_head stay FP8 and run through kernels::linear_fp8; --quantization fp8 makes such
  // matrices with 128x128 blocks); Error for any other name.
  // Whether an F8_E4M3 matrix for `use` is returned as stored (with fp8_scale()) rather than
  // widened: FP8 checkpoints without --dtype (and without a --quantization other than fp8).
  bool keeps_fp8(MatrixUse use) const;
  // Whether `slice` of an FP8 matrix of shape `whole` falls on the checkpoint's block bounds
  // (each end a multiple of the block, or the matrix's end), so that the part keeps its stored
  // FP8 bytes with the rows / columns of block scales that cover it.
  bool fp8_slice_on_blocks(const Shape& whole, const Slice& slice) const;
  // --quantization fp8: 16-bit projections and routed experts (one matrix each) become FP8.
  bool quantizes_to_fp8() const {
    return options_.quantization && *options_.quantization == DType::f8_e4m3;
  }
  struct Fp8Scales {
    Tensor scale;
    io::Fp8BlockQuantization block;
  };
  const Fp8Scales& fp8_scale(const std::string& name) const;
  const std::optional<io::Fp8BlockQuantization>& fp8() const { return fp8_; }
  // The f32 row scales of a matrix returned as i8 (--quantization w8a8, or an int8 channel-wise
  // checkpoint: io/w8a8_checkpoint.h): [rows] for a matrix, [experts, rows] for an expert stack
  // (of the rows matrix_rows returned); Error otherwise. W[r, c] = q[r, c] * scale[r].
  const Tensor& w8a8_scale(const std::string& name) const;
  // What matrix() did with block-quantized matrices, for the load log: "30 q4_1, 1 q8_0
  // matrices run natively (AVX-512 VNNI block kernels)"; empty when there were none.
  std::string block_summary() const;
  // What --quantization did, for the load log: "quantized at load to q8_0: 14 matrices (from
  // f32); kept: 1 embedding, 1 lm_head"; empty without --quantization.
  std::string quantization_summary() const;
  // Bytes of every tensor matrix() and vector_f32() returned, by dtype.
  const WeightBytes& loaded_bytes() const { return loaded_bytes_; }
  // f32 copy of a small tensor (norm weights, biases).
  Tensor vector_f32(const std::string& name, const Shape& expected,
                    std::optional<Slice> slice = std::nullopt);
  // Checkpoint tensors no layer asked for (reported so silent mismatches are visible).
  std::vector<std::string> unused() const;
  // Marks every tensor whose name starts with `prefix` as deliberately unused (e.g. DeepSeek-V3's
  // multi-token-prediction layers); returns how many there were.
  int64_t skip_prefix(const std::string& prefix);
  // Marks one tensor as deliberately unused (another rank's expert); false when absent.
  bool skip(const std::string& name);
  const io::Checkpoint& checkpoint() const { return checkpoint_; }
  // The communicator MoE layers dispatch over (a SingleProcessCommunicator for one process),
  // one object shared by every layer.
  std::shared_ptr<parallel::Communicator> expert_group();
  // The tensor-parallel group (attention, dense MLP, embedding, lm_head) and the group each
  // routed expert's intermediate is split over (a SingleProcessCommunicator for one process).
  std::shared_ptr<parallel::Communicator> tensor_group();
  std::shared_ptr<parallel::Communicator> moe_tensor_group();
  // The ranks of the expert group holding this rank's tokens (ParallelContext::
  // expert_token_peers); null for one process.
  std::shared_ptr<parallel::Communicator> expert_token_peers() const {
    return options_.parallel ? options_.parallel->expert_token_peers() : nullptr;
  }
  const parallel::MoeOptions& moe_options() const { return options_.moe; }
  // The expert-load state the model's MoE layers share (made on first use, for the layers'
  // expert group `group`); rank 0 of the group writes the record file.
  std::shared_ptr<parallel::EplbState> eplb_state(const parallel::Communicator& group);
  // The one eplb_state() made, or null (no MoE layer asked).
  std::shared_ptr<parallel::EplbState> made_eplb_state() const { return eplb_state_; }
  // Whether every rank of the expert group runs the same tokens (MoeConfig::replicated_tokens).
  // The process's parallel layout; null for one process.
  const parallel::ParallelContext* parallel() const { return options_.parallel.get(); }
  int64_t num_micro_batches() const { return options_.num_micro_batches; }
  bool fused_attention() const { return options_.fused_attention; }
  const MemoryOptions& memory_options() const { return options_.memory; }
  bool expert_tokens_replicated() const {
    return options_.parallel && options_.parallel->expert_tokens_replicated();
  }

 private:
  Tensor fetch(const std::string& name, const Shape& expected);
  // The part `slice` of `name` (whole shape `expected`): taken from the whole tensor, or as
  // stored when the checkpoint is a converted shard holding just that part (Error when it
  // holds another part: converted for another layout).
  Tensor fetch_part(const std::string& name, const Shape& expected,
                    const std::optional<Slice>& slice);
  // `slice` of a tensor of shape `expected` as the recorder and a shard's manifest name it.
  static std::optional<io::TensorSlice> stored_slice(const Shape& expected,
                                                     const std::optional<Slice>& slice);
  Tensor load_matrix(const std::string& name, const Shape& expected, MatrixUse use,
                     const std::optional<Slice>& slice);
  // An I8 tensor of an int8 channel-wise checkpoint with its `<name>_scale` [rows, 1] (sliced
  // with the rows; a column slice keeps every row's scale).
  Tensor load_int8(const std::string& name, const Shape& expected, MatrixUse use,
                   const std::optional<Slice>& slice);
  // The slice of a matrix's row scales [.., rows, 1] that goes with `slice` of the matrix.
  static std::optional<Slice> scale_slice(const Shape& expected, const std::optional<Slice>& slice);
  // Shows `out` (and its scales, under the names a converted checkpoint stores them by) to the
  // recorder.
  void record(const std::string& name, const Tensor& out, MatrixUse use, const Shape& expected,
              const std::optional<Slice>& slice);
  Tensor loaded(Tensor tensor);  // counts its bytes
  // `slice` of `tensor` (`name` for messages): a view for rows, a copy for columns.
  Tensor take(const std::string& name, const Tensor& tensor, const Slice& slice) const;
  // `tensor` (2-D, f32 / bf16 / f16, stored as `stored`) in FP8 E4M3 with 128x128 block scales,
  // the scales kept under `name` and both counted.
  Tensor to_fp8(const std::string& name, const Tensor& tensor, DType stored);
  // The projection quantized to options_.quantization, or nullopt when the policy keeps it;
  // `stored` is the checkpoint's dtype (FP8 arrives here widened to f32).
  std::optional<Tensor> maybe_quantize(const std::string& name, const Tensor& tensor, MatrixUse use,
                                       DType stored, const Shape& expected,
                                       const std::optional<Slice>& slice);
  const io::Checkpoint& checkpoint_;
  LoadOptions options_;
  std::optional<io::Fp8BlockQuantization> fp8_;
  std::set<std::string> used_;
  std::shared_ptr<parallel::Communicator> expert_group_;
  std::shared_ptr<parallel::Communicator> tensor_group_;
  std::shared_ptr<parallel::Communicator> moe_tensor_group_;
  std::shared_ptr<parallel::EplbState> eplb_state_;
  std::map<std::string, int64_t> native_blocks_;       // dtype name -> matrices kept in blocks
  std::map<std::string, int64_t> dequantized_blocks_;  // ... dequantized by weight_dtype
  std::map<std::string, int64_t> quantized_;           // source dtype -> matrices quantized
  std::map<std::string, int64_t> quantized_to_;        // block type -> matrices quantized
  std::map<std::string, int64_t> kept_;                // why -> matrices --quantization kept
  std::string first_partial_rows_;                     // a matrix kept for partial blocks
  WeightBytes loaded_bytes_;
  TensorRecorder* recorder_ = nullptr;
  std::map<std::string, Fp8Scales> fp8_scales_;  // matrices in FP8 -> their f32 scales
  int64_t kept_fp8_ = 0;
  std::map<std::string, Tensor> w8a8_scales_;  // matrices in i8 -> row scales
  int64_t kept_int8_ = 0;                      // i8 matrices of the checkpoint kept as stored
};

}  // namespace deepinfer::model
