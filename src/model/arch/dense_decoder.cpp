#include "model/arch/dense_decoder.h"

#include <string>

#include "core/error.h"
#include "kernels/kernels.h"

namespace deepinfer::model {

DenseDecoder::DenseDecoder(const io::ModelConfig& config, WeightLoader& weights,
                           DenseDecoderOptions options)
    : config_(config) {
  DI_CHECK(config.hidden_act == "silu", "config.json: hidden_act '", config.hidden_act,
           "' is not supported by ", config.architecture, " (expected silu)");
  shape_.hidden = config.hidden_size;
  shape_.heads = config.num_attention_heads;
  shape_.kv_heads = config.num_key_value_heads;
  shape_.head_dim = config.head_dim;
  shape_.rotary_dim =
      static_cast<int64_t>(static_cast<double>(config.head_dim) * config.partial_rotary_factor);
  shape_.rope_layout = kernels::RopeLayout::half_split;
  rope_ = std::make_unique<RotaryEmbedding>(config, shape_.rotary_dim);

  const int64_t hidden = config.hidden_size;
  embedding_ = Embedding::load(weights, "model.embed_tokens.weight", config.vocab_size, hidden);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i);
    layers_.push_back(Layer{
        RmsNorm::load(weights, prefix + ".input_layernorm.weight", hidden, config.rms_norm_eps),
        GqaAttention::load(weights, prefix + ".self_attn", shape_, options.qkv_bias,
                           options.qk_norm, config.rms_norm_eps),
        RmsNorm::load(weights, prefix + ".post_attention_layernorm.weight", hidden,
                      config.rms_norm_eps),
        GatedMlp::load(weights, prefix + ".mlp", hidden, config.intermediate_size),
    });
  }
  final_norm_ = RmsNorm::load(weights, "model.norm.weight", hidden, config.rms_norm_eps);
  // Tied checkpoints omit lm_head.weight (transformers ties it to the embedding).
  if (config.tie_word_embeddings) {
    lm_head_.weight = embedding_.weight;
    lm_head_.in_features = hidden;
    lm_head_.out_features = config.vocab_size;
  } else {
    lm_head_ = Linear::load(weights, "lm_head", hidden, config.vocab_size, false);
  }
}

KvLayout DenseDecoder::kv_layout() const {
  return KvLayout{config_.num_hidden_layers, shape_.kv_heads, shape_.head_dim, shape_.head_dim};
}

void DenseDecoder::forward(const ForwardBatch& batch, cache::KvCache& cache, float* logits,
                           ThreadPool& pool) {
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  DI_CHECK(batch.positions.size() == batch.tokens.size(), "forward: ", tokens, " tokens but ",
           batch.positions.size(), " positions");
  const int64_t hidden = config_.hidden_size;
  const int64_t half = shape_.rotary_dim / 2;
  std::vector<float> cos(static_cast<size_t>(tokens * half));
  std::vector<float> sin(static_cast<size_t>(tokens * half));
  rope_->compute(batch.positions.data(), tokens, cos.data(), sin.data());

  std::vector<float> residual(static_cast<size_t>(tokens * hidden));
  std::vector<float> normed(residual.size());
  std::vector<float> branch(residual.size());
  embedding_.forward(batch.tokens, residual.data());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    layer.input_norm.forward(residual.data(), tokens, normed.data());
    layer.attention.forward(normed.data(), batch, cos.data(), sin.data(), cache,
                            static_cast<int64_t>(i), branch.data(), pool);
    kernels::add(residual.data(), branch.data(), residual.data(), tokens * hidden);
    layer.post_attention_norm.forward(residual.data(), tokens, normed.data());
    layer.mlp.forward(normed.data(), tokens, branch.data(), pool);
    kernels::add(residual.data(), branch.data(), residual.data(), tokens * hidden);
  }

  // Only the requested rows go through the final norm and the (large) lm_head.
  const auto rows = static_cast<int64_t>(batch.logit_rows.size());
  std::vector<float> last(static_cast<size_t>(rows * hidden));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = batch.logit_rows[static_cast<size_t>(r)];
    DI_CHECK(row >= 0 && row < tokens, "forward: logit row ", row, " outside the batch");
    final_norm_.forward(residual.data() + row * hidden, 1, last.data() + r * hidden);
  }
  lm_head_.forward(last.data(), rows, logits, pool);
}

}  // namespace deepinfer::model
