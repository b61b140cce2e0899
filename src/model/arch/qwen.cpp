// Qwen2 / Qwen2.5 (q/k/v bias) and Qwen3 (per-head q/k RMSNorm, explicit head_dim):
// GQA attention + SwiGLU MLP in the shared decoder. The GQA spec defined here is shared with
// GLM and Llama (families.h).
#include "core/error.h"
#include "model/arch/families.h"
#include "model/arch/transformer_decoder.h"
#include "model/layers/attention.h"
#include "model/layers/gated_mlp.h"

namespace deepinfer::model {

AttentionShape gqa_shape(const io::ModelConfig& config) {
  AttentionShape shape;
  shape.hidden = config.hidden_size;
  shape.heads = config.num_attention_heads;
  shape.kv_heads = config.num_key_value_heads;
  shape.head_dim = config.head_dim;
  shape.rotary_dim =
      static_cast<int64_t>(static_cast<double>(config.head_dim) * config.partial_rotary_factor);
  shape.rope_layout = kernels::RopeLayout::half_split;
  return shape;
}

bool rope_setting_given(const io::ModelConfig& config, const char* key) {
  const nlohmann::json& raw = config.raw;
  if (raw.contains(key) && !raw[key].is_null()) return true;
  for (const char* dict : {"rope_parameters", "rope_scaling"}) {
    const auto it = raw.find(dict);
    if (it == raw.end() || !it->is_object()) continue;
    if (it->contains(key)) return true;
    const auto full = it->find("full_attention");
    if (full != it->end() && full->is_object() && full->contains(key)) return true;
  }
  return false;
}

DecoderSpec gqa_decoder_spec(const io::ModelConfig& config, const GqaVariant& variant) {
  DI_CHECK(config.hidden_act == "silu", "config.json: hidden_act '", config.hidden_act,
           "' is not supported by ", config.architecture, " (expected silu)");
  const AttentionShape shape = gqa_shape(config);
  DecoderSpec spec;
  spec.rotary_dim = shape.rotary_dim;
  spec.kv_layout = {config.num_hidden_layers, shape.kv_heads, shape.head_dim, shape.head_dim};
  const double eps = config.rms_norm_eps;
  const GqaTensors tensors = variant.attention;
  spec.attention = [shape, tensors, eps](WeightLoader& weights, const std::string& prefix,
                                         int64_t) {
    return GqaAttention::load(weights, prefix + ".self_attn", shape, tensors, eps);
  };
  const int64_t hidden = config.hidden_size;
  const int64_t intermediate = config.intermediate_size;
  const bool mlp_bias = variant.mlp_bias;
  spec.feed_forward = [hidden, intermediate, mlp_bias](WeightLoader& weights,
                                                       const std::string& prefix, int64_t) {
    return GatedMlp::load(weights, prefix + ".mlp", hidden, intermediate, mlp_bias);
  };
  return spec;
}

std::unique_ptr<CausalLM> build_qwen2(const io::ModelConfig& config, WeightLoader& weights) {
  return std::make_unique<TransformerDecoder>(
      config, weights, gqa_decoder_spec(config, {.attention = {.qkv_bias = true}}));
}

std::unique_ptr<CausalLM> build_qwen3(const io::ModelConfig& config, WeightLoader& weights) {
  const bool bias = config.attention_bias.value_or(false);
  return std::make_unique<TransformerDecoder>(
      config, weights,
      gqa_decoder_spec(config, {.attention = {.qkv_bias = bias, .qk_norm = QkNorm::per_head}}));
}

}  // namespace deepinfer::model
