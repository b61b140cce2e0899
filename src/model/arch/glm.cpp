// GLM-4 (GlmForCausalLM, e.g. GLM-4-9B-chat-hf) and GLM-4-0414 (Glm4ForCausalLM), after
// transformers' modeling_glm.py / modeling_glm4.py:
// - GQA attention with q/k/v bias (attention_bias, default true) and no o_proj bias;
// - partial rotary: only the first head_dim * partial_rotary_factor (default 0.5) features
//   of each head rotate, and they pair up interleaved, (2i, 2i + 1), with angle
//   position * inv_freq[i] (cos/sin[..., :dim/2].repeat_interleave(2) against a rotate_half
//   that negates and swaps odd/even features) = kernels::RopeLayout::interleaved;
// - SwiGLU MLP with gate and up stored fused (gate_up_proj, gate first);
// - Glm4 adds RMSNorms on the attention and MLP outputs before each residual add.
#include <optional>

#include "core/error.h"
#include "model/arch/families.h"
#include "model/arch/transformer_decoder.h"
#include "model/layers/attention.h"
#include "model/layers/fused_gate_up_mlp.h"

namespace deepinfer::model {
namespace {

bool rope_dict_has(const nlohmann::json& raw, const char* dict, const char* key) {
  const auto it = raw.find(dict);
  if (it == raw.end() || !it->is_object()) return false;
  if (it->contains(key)) return true;
  const auto full = it->find("full_attention");  // per-layer-type nesting
  return full != it->end() && full->is_object() && full->contains(key);
}

// GlmConfig / Glm4Config defaults differ from the generic ones ModelConfig::parse fills in
// for absent keys; apply transformers' values so an abridged config.json means the same model.
io::ModelConfig with_glm_defaults(io::ModelConfig config) {
  const nlohmann::json& raw = config.raw;
  const std::string source = config.architecture + " config.json";
  if (!raw.contains("partial_rotary_factor") &&
      !rope_dict_has(raw, "rope_parameters", "partial_rotary_factor") &&
      !rope_dict_has(raw, "rope_scaling", "partial_rotary_factor")) {
    config.partial_rotary_factor = 0.5;
  }
  if (!raw.contains("head_dim")) config.head_dim = 128;
  if (!raw.contains("num_key_value_heads")) {
    config.num_key_value_heads = 2;
    DI_CHECK(config.num_attention_heads % 2 == 0, source,
             ": num_key_value_heads is absent, so GLM's default 2 applies, but it does not divide "
             "num_attention_heads ",
             config.num_attention_heads, "; set num_key_value_heads");
  }
  if (!raw.contains("rms_norm_eps")) config.rms_norm_eps = 1.5625e-7;
  if (!config.attention_bias.has_value()) config.attention_bias = true;
  if (!raw.contains("intermediate_size")) config.intermediate_size = 13696;
  const double rotary = static_cast<double>(config.head_dim) * config.partial_rotary_factor;
  const auto rotary_dim = static_cast<int64_t>(rotary);
  DI_CHECK(rotary_dim >= 2 && rotary_dim % 2 == 0, source, ": head_dim ", config.head_dim,
           " * partial_rotary_factor ", config.partial_rotary_factor, " gives ", rotary,
           " rotary features; GLM needs an even number >= 2");
  return config;
}

DecoderSpec glm_decoder_spec(const io::ModelConfig& config, bool sandwich_norms) {
  const GqaTensors tensors{.qkv_bias = *config.attention_bias};
  DecoderSpec spec = gqa_decoder_spec(config, {.attention = tensors});
  AttentionShape shape = gqa_shape(config);
  shape.rope_layout = kernels::RopeLayout::interleaved;
  const double eps = config.rms_norm_eps;
  spec.attention = [shape, tensors, eps](WeightLoader& weights, const std::string& prefix,
                                         int64_t) {
    return GqaAttention::load(weights, prefix + ".self_attn", shape, tensors, eps);
  };
  const int64_t hidden = config.hidden_size;
  const int64_t intermediate = config.intermediate_size;
  spec.feed_forward = [hidden, intermediate](WeightLoader& weights, const std::string& prefix,
                                             int64_t) {
    return FusedGateUpMlp::load(weights, prefix + ".mlp", hidden, intermediate);
  };
  spec.sandwich_norms = sandwich_norms;
  return spec;
}

std::unique_ptr<CausalLM> build(const io::ModelConfig& file_config, WeightLoader& weights,
                                bool sandwich_norms) {
  const io::ModelConfig config = with_glm_defaults(file_config);
  return std::make_unique<TransformerDecoder>(config, weights,
                                              glm_decoder_spec(config, sandwich_norms));
}

}  // namespace

std::unique_ptr<CausalLM> build_glm(const io::ModelConfig& config, WeightLoader& weights) {
  return build(config, weights, false);
}

std::unique_ptr<CausalLM> build_glm4(const io::ModelConfig& config, WeightLoader& weights) {
  return build(config, weights, true);
}

}  // namespace deepinfer::model
