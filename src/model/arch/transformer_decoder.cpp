#include "model/arch/transformer_decoder.h"

#include <cstdio>

#include "core/error.h"
#include "core/log.h"
#include "core/scratch.h"
#include "kernels/kernels.h"
#include "model/layers/attention.h"

namespace deepinfer::model {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

}  // namespace

TransformerDecoder::TransformerDecoder(const io::ModelConfig& config, WeightLoader& weights,
                                       DecoderSpec spec)
    : config_(config), spec_(std::move(spec)) {
  DI_CHECK(spec_.attention && spec_.feed_forward, "decoder spec of ", config.architecture,
           " lacks an attention or feed-forward builder");
  if (const parallel::ParallelContext* parallel = weights.parallel()) {
    stages_ = parallel->pipeline_parallel_size();
    stage_ = parallel->pipeline_stage();
    if (stages_ > 1) pipeline_ = parallel->pipeline_group();
  }
  num_micro_batches_ = stages_ > 1 ? weights.num_micro_batches() : 1;
  fused_norms_ = weights.fused_attention();
  layer_range_ =
      parallel::pipeline_layers(config.num_hidden_layers, stage_, stages_,
                                weights.checkpoint().dir() + " (config.json num_hidden_layers)");
  spec_.kv_layout.num_layers = layer_range_.size();
  if (auto& index = spec_.kv_layout.index_layers; !index.empty()) {
    DI_CHECK(static_cast<int64_t>(index.size()) == config.num_hidden_layers, config.architecture,
             ": ", index.size(), " indexer layer flags for ", config.num_hidden_layers, " layers");
    index = std::vector<bool>(index.begin() + layer_range_.begin, index.begin() + layer_range_.end);
  }
  rope_ = std::make_unique<RotaryEmbedding>(config, spec_.rotary_dim);
  // Tensor parallelism: this rank's cache holds only the KV heads of its query heads (MLA's
  // one latent "head" is replicated).
  spec_.kv_layout.kv_heads = kv_heads_per_rank(config.num_attention_heads, spec_.kv_layout.kv_heads,
                                               weights.tensor_group()->world_size());
  const int64_t hidden = config.hidden_size;
  const double eps = config.rms_norm_eps;
  // A tied lm_head is the embedding: the last stage holds it too.
  if (first_stage() || (last_stage() && config.tie_word_embeddings)) {
    embedding_ = Embedding::load(weights, "model.embed_tokens.weight", config.vocab_size, hidden,
                                 config.tie_word_embeddings);
  } else {
    weights.skip("model.embed_tokens.weight");
  }
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i);
    if (!layer_range_.contains(i)) {
      weights.skip_prefix(prefix + ".");  // another stage's
      continue;
    }
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
  if (!last_stage()) {
    weights.skip("model.norm.weight");
    weights.skip("lm_head.weight");
    return;
  }
  final_norm_ = RmsNorm::load(weights, "model.norm.weight", hidden, eps);
  // Tied checkpoints omit lm_head.weight (transformers ties it to the embedding).
  lm_head_ = config.tie_word_embeddings
                 ? LmHead::tied(embedding_, weights.memory_options().huge_pages)
                 : LmHead::load(weights, "lm_head.weight", config.vocab_size, hidden);
}

TransformerDecoder::~TransformerDecoder() {
  if (stages_ == 1 || times_.steps == 0) return;
  const double total = times_.compute + times_.wait;
  log::info("pipeline stage ", stage_, " of ", stages_, " (layers ", layer_range_.begin, "-",
            layer_range_.end - 1, "): ", times_.steps, " steps, compute ", fixed(times_.compute, 3),
            " s, waiting on other stages ", fixed(times_.wait, 3), " s (",
            fixed(total > 0 ? 100.0 * times_.wait / total : 0.0, 1), " %), ", num_micro_batches_,
            " micro-batch", num_micro_batches_ == 1 ? "" : "es", " per step");
}

void TransformerDecoder::forward(const ForwardBatch& batch, cache::KvCache& cache, float* logits,
                                 ThreadPool& pool) {
  DI_CHECK(batch.positions.size() == batch.tokens.size(), "forward: ", batch.tokens.size(),
           " tokens but ", batch.positions.size(), " positions");
  DI_CHECK(cache.spec().num_layers == layer_range_.size(), "forward: a KV cache of ",
           cache.spec().num_layers, " layers for the ", layer_range_.size(),
           " layers this rank holds");
  if (stages_ == 1) {
    forward_part(batch, cache, logits, pool);
    return;
  }
  const auto vocab = static_cast<size_t>(config_.vocab_size);
  const auto parts = split_micro_batches(batch, num_micro_batches_);
  std::vector<float> part_logits;
  for (const MicroBatch& part : parts) {
    if (!last_stage()) {
      forward_part(part.batch, cache, nullptr, pool);
      continue;
    }
    part_logits.resize(part.batch.logit_rows.size() * vocab);
    forward_part(part.batch, cache, part_logits.data(), pool);
    for (size_t r = 0; r < part.logit_slots.size(); ++r) {
      std::copy_n(part_logits.begin() + static_cast<std::ptrdiff_t>(r * vocab), vocab,
                  logits + static_cast<size_t>(part.logit_slots[r]) * vocab);
    }
  }
  // The logits go back to the first stage once, after every part: a blocking send of part
  // j's logits while the first stage still sends part j + 1 would deadlock.
  const std::span<float> all(logits, batch.logit_rows.size() * vocab);
  const auto start = Clock::now();
  if (last_stage()) pipeline_->send<float>(all, 0);
  if (first_stage()) pipeline_->recv<float>(all, static_cast<int>(stages_ - 1));
  times_.wait += seconds_since(start);
  ++times_.steps;
}

void TransformerDecoder::forward_part(const ForwardBatch& batch, cache::KvCache& cache,
                                      float* logits, ThreadPool& pool) {
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t hidden = config_.hidden_size;
  std::vector<float> residual(static_cast<size_t>(tokens * hidden));
  if (first_stage()) {
    embedding_.forward(batch.tokens, residual.data());
    if (observer_ != nullptr) observer_->observe(-1, "embedding", residual.data(), tokens, hidden);
  } else {
    const auto start = Clock::now();
    pipeline_->recv<float>(residual, static_cast<int>(stage_ - 1));
    times_.wait += seconds_since(start);
  }
  const auto start = Clock::now();
  run_layers(batch, cache, residual, pool);
  if (last_stage()) compute_logits(batch, residual, logits, pool);
  if (stages_ > 1) times_.compute += seconds_since(start);
  if (!last_stage()) {
    const auto sent = Clock::now();
    pipeline_->send<float>(residual, static_cast<int>(stage_ + 1));
    times_.wait += seconds_since(sent);
  }
}

void TransformerDecoder::run_layers(const ForwardBatch& batch, cache::KvCache& cache,
                                    std::vector<float>& residual, ThreadPool& pool) {
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t hidden = config_.hidden_size;
  const int64_t half = spec_.rotary_dim / 2;
  std::vector<float> cos(static_cast<size_t>(tokens * half));
  std::vector<float> sin(static_cast<size_t>(tokens * half));
  rope_->compute(batch.positions.data(), tokens, cos.data(), sin.data());

  ScratchFloats normed(residual.size());
  ScratchFloats branch(residual.size());
  ForwardObserver* const watch = observer_;
  const auto report = [&](int64_t layer, std::string_view block, const auto& data) {
    if (watch != nullptr) watch->observe(layer, block, data.data(), tokens, hidden);
  };
  // residual += branch, then normed = norm(residual): one pass (fused) or two.
  const auto add_norm = [&](const RmsNorm& norm) {
    if (fused_norms_) {
      norm.forward_residual(residual.data(), branch.data(), tokens, normed.data());
    } else {
      kernels::add(residual.data(), branch.data(), residual.data(), tokens * hidden);
      norm.forward(residual.data(), tokens, normed.data());
    }
  };
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    const auto l = layer_range_.begin + static_cast<int64_t>(i);  // decoder layer, for reports
    const auto slot = static_cast<int64_t>(i);                    // its layer in this KV cache
    // Layer i > 0 got its input norm from the previous layer's residual add.
    if (i == 0) layer.input_norm.forward(residual.data(), tokens, normed.data());
    report(l, "input_norm", normed);
    layer.attention->forward(normed.data(), batch, cos.data(), sin.data(), cache, slot,
                             branch.data(), pool);
    report(l, "attention", branch);
    if (spec_.sandwich_norms) {
      layer.post_self_attn_norm.forward(branch.data(), tokens, branch.data());
      report(l, "post_self_attn_norm", branch);
    }
    add_norm(layer.post_attention_norm);
    report(l, "post_attention_norm", normed);
    layer.feed_forward->forward(normed.data(), tokens, branch.data(), pool);
    if (watch != nullptr)
      report(l, layer.feed_forward->expert_load().empty() ? "mlp" : "moe", branch);
    if (spec_.sandwich_norms) {
      layer.post_mlp_norm.forward(branch.data(), tokens, branch.data());
      report(l, "post_mlp_norm", branch);
    }
    if (i + 1 < layers_.size()) {
      add_norm(layers_[i + 1].input_norm);
    } else {  // the final norm runs on the logit rows only (compute_logits)
      kernels::add(residual.data(), branch.data(), residual.data(), tokens * hidden);
    }
    report(l, "layer", residual);
  }
}

void TransformerDecoder::compute_logits(const ForwardBatch& batch,
                                        const std::vector<float>& residual, float* logits,
                                        ThreadPool& pool) {
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t hidden = config_.hidden_size;
  // Only the requested rows go through the final norm and the (large) lm_head.
  const auto rows = static_cast<int64_t>(batch.logit_rows.size());
  std::vector<float> last(static_cast<size_t>(rows * hidden));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = batch.logit_rows[static_cast<size_t>(r)];
    DI_CHECK(row >= 0 && row < tokens, "forward: logit row ", row, " outside the batch");
    final_norm_.forward(residual.data() + row * hidden, 1, last.data() + r * hidden);
  }
  if (observer_ != nullptr) {
    // The final norm of every row (the lm_head's input), not only the requested ones.
    std::vector<float> all(residual.size());
    final_norm_.forward(residual.data(), tokens, all.data());
    observer_->observe(-1, "final_norm", all.data(), tokens, hidden);
  }
  lm_head_.forward(last.data(), rows, logits, pool);
}

std::vector<std::vector<uint64_t>> TransformerDecoder::expert_load() const {
  // One entry per decoder layer; another stage's layers are empty here.
  std::vector<std::vector<uint64_t>> load(static_cast<size_t>(config_.num_hidden_layers));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto counts = layers_[i].feed_forward->expert_load();
    load[static_cast<size_t>(layer_range_.begin) + i].assign(counts.begin(), counts.end());
  }
  return load;
}

void TransformerDecoder::reset_expert_load() {
  for (Layer& layer : layers_) layer.feed_forward->reset_load_stats();
}

}  // namespace deepinfer::model
