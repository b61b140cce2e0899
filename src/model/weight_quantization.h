#pragma once
// --quantization (key `quantization`): which block type a checkpoint's projections are
// quantized to while loading, and the quantizing itself. The policy of which matrices it
// applies to lives in WeightLoader::matrix (MatrixUse) and docs/QUANTIZATION.md; which type
// each projection gets (one type, or llama.cpp's q4_k_m mix, with llama-quantize's fallback
// for rows that are not whole blocks) lives here.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "io/hf_config.h"

namespace deepinfer::model {

// A --quantization choice: one block type for every projection, or llama.cpp's Q4_K_M mix
// (q4_k, with q6_k for the attn_v / ffn_down of the layers llama-quantize picks). Converts
// from a DType, so `options.quantization = DType::q8_0` keeps working.
struct Quantization {
  Quantization(DType block_type) : type(block_type) {}  // NOLINT: implicit on purpose
  static Quantization q4_k_m() {
    Quantization q(DType::q4_k);
    q.mix = true;
    return q;
  }

  DType type;        // every projection's type (q4_k for the mix, before its exceptions)
  bool mix = false;  // llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
  // The model's shape, which the mix needs (with_model_shape): decoder layers and routed
  // experts per MoE layer (0: dense).
  int64_t layers = 0;
  int64_t experts = 0;
  // --quantize-lm-head (key quantize_lm_head): the output projection, and the embedding when
  // it is tied to it, quantized too, to llama-quantize's output type (lm_head_target).
  // Block types only (with_lm_head refuses w8a8 and fp8).
  bool lm_head = false;

  std::string name() const;  // "q4_k_m", "q8_0", ...
  friend bool operator==(const Quantization& q, DType type) { return !q.mix && q.type == type; }
};

// The block type a --quantization name asks for: q8_0 (alias int8), q4_0, q4_1, q5_0, q5_1,
// q4_k, q5_k, q6_k, q4_k_m (alias int4); "none" is nullopt. Throws Error naming the value and
// what this build quantizes to for a type it does not build yet (w8a8, fp8, ...) or an unknown
// name.
std::optional<Quantization> parse_quantization(std::string_view name);
// The problem with a --quantization name without repeating it ("" when it is accepted), for
// config errors that name the value themselves.
std::string quantization_problem(std::string_view name);
// "q8_0 (alias int8), q4_0, ...": what parse_quantization accepts besides none.
std::string quantization_choices();

// `q` with the model's layer and routed-expert counts (num_hidden_layers; num_experts,
// n_routed_experts or num_local_experts of config.json), which the q4_k_m mix reads.
Quantization with_model_shape(Quantization q, const io::ModelConfig& config);

// What --quantization makes of one projection named `name` (checkpoint spelling,
// "model.layers.3.self_attn.v_proj.weight") with rows of `cols` elements.
struct QuantizationTarget {
  std::optional<DType> type;  // nullopt: kept in its dtype (rows not whole 32-element blocks)
  bool fallback = false;      // type replaces one whose blocks do not divide the rows
};
// The mix's type for the tensor (q6_k for attn_v / ffn_down where llama.cpp's use_more_bits
// picks the layer, q8_0 / q5_k for attn_v, attn_k / attn_output of 8-expert models), then
// llama-quantize's fallback when cols is not a multiple of 256: q4_k -> q5_0, q5_k -> q5_1,
// q6_k -> q8_0; a row that is not whole 32-element blocks either is kept (llama.cpp: F16).
QuantizationTarget quantization_target(const Quantization& q, const std::string& name,
                                       int64_t cols);

// `q` with the lm_head quantized too (Quantization::lm_head); throws Error for w8a8 and fp8,
// whose kernels run projections only.
Quantization with_lm_head(Quantization q);
// llama-quantize's type for output.weight (or a tied token_embd): q8_0 when q is q8_0 or the
// rows are not whole 256-element super-blocks, q6_k otherwise; kept (nullopt) when the rows
// are not whole 32-element blocks.
QuantizationTarget lm_head_target(const Quantization& q, int64_t cols);

// A [rows, cols] f32 / bf16 / f16 matrix quantized row by row to block type `target` with the
// reference quantizers (core/quantize_blocks.h); cols must be whole blocks.
Tensor quantize_matrix(const Tensor& matrix, DType target);

}  // namespace deepinfer::model
