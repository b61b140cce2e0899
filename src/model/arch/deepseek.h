#pragma once
// DeepSeek-V2 / V2-Lite / V2.5 (DeepseekV2ForCausalLM) and DeepSeek-V3 / R1
// (DeepseekV3ForCausalLM): MLA attention in every layer; a dense SwiGLU MLP in the first
// first_k_dense_replace layers (and off the moe_layer_freq grid), DeepSeekMoE elsewhere.
// V3 checkpoints' multi-token-prediction layers (model.layers.{num_hidden_layers + i}) are
// skipped at load. Exposed beside the registry builders so tests and benchmarks can force
// an MLA form.
#include <memory>

#include "io/hf_config.h"
#include "model/causal_lm.h"
#include "model/layers/mla/mla_attention.h"

namespace deepinfer::model {

struct DeepseekOptions {
  MlaForm mla_form = MlaForm::automatic;
};

// MLA geometry, rope layout and softmax scale of every layer, from config.json. V2 rotates
// adjacent pairs (transformers multiplies (x[2i], x[2i+1]) as one complex number); V3 does
// too when rope_interleave is true (its default), else rotate_half pairs (i, i + d/2).
MlaShape deepseek_mla_shape(const io::ModelConfig& config);

// Builds either family (by config.architecture); throws Error for unsupported settings.
std::unique_ptr<CausalLM> build_deepseek(const io::ModelConfig& config, WeightLoader& weights,
                                         const DeepseekOptions& options);

}  // namespace deepinfer::model
