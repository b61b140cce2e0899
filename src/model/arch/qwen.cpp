// Qwen2 / Qwen2.5 (q/k/v bias) and Qwen3 (per-head q/k norm, explicit head_dim): both are
// the dense decoder with one option each.
#include "model/arch/dense_decoder.h"
#include "model/arch/families.h"

namespace deepinfer::model {

std::unique_ptr<CausalLM> build_qwen2(const io::ModelConfig& config, WeightLoader& weights) {
  return std::make_unique<DenseDecoder>(config, weights,
                                        DenseDecoderOptions{.qkv_bias = true, .qk_norm = false});
}

std::unique_ptr<CausalLM> build_qwen3(const io::ModelConfig& config, WeightLoader& weights) {
  const bool bias = config.attention_bias.value_or(false);
  return std::make_unique<DenseDecoder>(config, weights,
                                        DenseDecoderOptions{.qkv_bias = bias, .qk_norm = true});
}

}  // namespace deepinfer::model
