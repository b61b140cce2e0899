#pragma once
// Builders of every model family; model/registry.cpp maps architecture names to them.
#include <memory>

#include "model/arch/transformer_decoder.h"
#include "model/causal_lm.h"
#include "model/layers/attention.h"

namespace deepinfer::model {

// Shared pieces for GQA families (Qwen, GLM, Llama): attention geometry from config.json and
// a spec with GQA attention + dense SwiGLU MLP in every layer (families then override slots).
// A family differs only in which optional tensors its layers carry.
struct GqaVariant {
  GqaTensors attention;   // q/k/v bias, o_proj bias, q/k norm
  bool mlp_bias = false;  // gate/up/down_proj.bias
};
AttentionShape gqa_shape(const io::ModelConfig& config);
// Whether config.json sets the RoPE setting `key` (e.g. "partial_rotary_factor", "rope_theta")
// at the top level or in rope_parameters / rope_scaling (also their "full_attention" object):
// families whose transformers config has another default than ModelConfig's apply it when not.
bool rope_setting_given(const io::ModelConfig& config, const char* key);
DecoderSpec gqa_decoder_spec(const io::ModelConfig& config, const GqaVariant& variant);

std::unique_ptr<CausalLM> build_qwen2(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_qwen3(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_llama(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_mistral(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_qwen3_moe(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_glm4_moe(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_minimax_m2(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_glm(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_glm4(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_deepseek_v2(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_deepseek_v3(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_deepseek_v32(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_glm_moe_dsa(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_kimi_k25(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_glm4_moe_lite(const io::ModelConfig& config, WeightLoader& weights);

}  // namespace deepinfer::model
