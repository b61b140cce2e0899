#include "model/arch/transformer_decoder.h"

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/layers/attention.h"

namespace deepinfer::model {

TransformerDecoder::TransformerDecoder(const io::ModelConfig& config, WeightLoader& weights,
                                       DecoderSpec spec)
    : config_(config), spec_(std::move(spec)) {
  DI_CHECK(spec_.attention && spec_.feed_forward, "decoder spec of ", config.architecture,
           " lacks an attention or feed-forward builder");
  rope_ = std::make_unique<RotaryEmbedding>(config, spec_.rotary_dim);
  // Tensor parallelism: this rank's cache holds only the KV heads of its query heads (MLA's
  // one latent "head" is replicated).
  spec_.kv_layout.kv_heads = kv_heads_per_rank(config.num_attention_heads, spec_.kv_layout.kv_heads,
                                               weights.tensor_group()->world_size());
  const int64_t hidden = config.hidden_size;
  const double eps = config.rms_norm_eps;
  embedding_ = Embedding::load(weights, "model.embed_tokens.weight", config.vocab_size, hidden);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i);
    Layer layer;
    layer.input_norm =
        RmsNorm::load(weights, prefix + "." + spec_.input_norm + ".weight", hidden, eps);
    layer.attention = spec_.attention(weights, prefix, i);
    layer.post_attention_norm =
        RmsNorm::load(weights, prefix + "." + spec_.post_attention_norm + ".weight", hidden, eps);
    layer.feed_forward = spec_.feed_forward(weights, prefix, i);
    if (spec_.sandwich_norms) {
      layer.post_self_attn_norm =
          RmsNorm::load(weights, prefix + ".post_self_attn_layernorm.weight", hidden, eps);
      layer.post_mlp_norm =
          RmsNorm::load(weights, prefix + ".post_mlp_layernorm.weight", hidden, eps);
    }
    layers_.push_back(std::move(layer));
  }
  final_norm_ = RmsNorm::load(weights, "model.norm.weight", hidden, eps);
  // Tied checkpoints omit lm_head.weight (transformers ties it to the embedding).
  lm_head_ = config.tie_word_embeddings
                 ? LmHead::tied(embedding_)
                 : LmHead::load(weights, "lm_head.weight", config.vocab_size, hidden);
}

void TransformerDecoder::forward(const ForwardBatch& batch, cache::KvCache& cache, float* logits,
                                 ThreadPool& pool) {
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  DI_CHECK(batch.positions.size() == batch.tokens.size(), "forward: ", tokens, " tokens but ",
           batch.positions.size(), " positions");
  const int64_t hidden = config_.hidden_size;
  const int64_t half = spec_.rotary_dim / 2;
  std::vector<float> cos(static_cast<size_t>(tokens * half));
  std::vector<float> sin(static_cast<size_t>(tokens * half));
  rope_->compute(batch.positions.data(), tokens, cos.data(), sin.data());

  std::vector<float> residual(static_cast<size_t>(tokens * hidden));
  std::vector<float> normed(residual.size());
  std::vector<float> branch(residual.size());
  ForwardObserver* const watch = observer_;
  const auto report = [&](int64_t layer, std::string_view block, const std::vector<float>& data) {
    if (watch != nullptr) watch->observe(layer, block, data.data(), tokens, hidden);
  };
  embedding_.forward(batch.tokens, residual.data());
  report(-1, "embedding", residual);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    const auto l = static_cast<int64_t>(i);
    layer.input_norm.forward(residual.data(), tokens, normed.data());
    report(l, "input_norm", normed);
    layer.attention->forward(normed.data(), batch, cos.data(), sin.data(), cache, l, branch.data(),
                             pool);
    report(l, "attention", branch);
    if (spec_.sandwich_norms) {
      layer.post_self_attn_norm.forward(branch.data(), tokens, branch.data());
      report(l, "post_self_attn_norm", branch);
    }
    kernels::add(residual.data(), branch.data(), residual.data(), tokens * hidden);
    layer.post_attention_norm.forward(residual.data(), tokens, normed.data());
    report(l, "post_attention_norm", normed);
    layer.feed_forward->forward(normed.data(), tokens, branch.data(), pool);
    if (watch != nullptr)
      report(l, layer.feed_forward->expert_load().empty() ? "mlp" : "moe", branch);
    if (spec_.sandwich_norms) {
      layer.post_mlp_norm.forward(branch.data(), tokens, branch.data());
      report(l, "post_mlp_norm", branch);
    }
    kernels::add(residual.data(), branch.data(), residual.data(), tokens * hidden);
    report(l, "layer", residual);
  }

  // Only the requested rows go through the final norm and the (large) lm_head.
  const auto rows = static_cast<int64_t>(batch.logit_rows.size());
  std::vector<float> last(static_cast<size_t>(rows * hidden));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = batch.logit_rows[static_cast<size_t>(r)];
    DI_CHECK(row >= 0 && row < tokens, "forward: logit row ", row, " outside the batch");
    final_norm_.forward(residual.data() + row * hidden, 1, last.data() + r * hidden);
  }
  if (watch != nullptr) {
    // The final norm of every row (the lm_head's input), not only the requested ones.
    std::vector<float> all(residual.size());
    final_norm_.forward(residual.data(), tokens, all.data());
    report(-1, "final_norm", all);
  }
  lm_head_.forward(last.data(), rows, logits, pool);
}

std::vector<std::vector<uint64_t>> TransformerDecoder::expert_load() const {
  std::vector<std::vector<uint64_t>> load;
  for (const Layer& layer : layers_) {
    const auto counts = layer.feed_forward->expert_load();
    load.emplace_back(counts.begin(), counts.end());
  }
  return load;
}

void TransformerDecoder::reset_expert_load() {
  for (Layer& layer : layers_) layer.feed_forward->reset_load_stats();
}

}  // namespace deepinfer::model
