// GLM-4.5 / GLM-4.5-Air (Glm4MoeForCausalLM), after transformers' modeling_glm4_moe.py:
// - GQA attention, q/k/v bias when attention_bias (o_proj never has one), optional per-head
//   q/k RMSNorm (use_qk_norm); partial rotary: the first head_dim * partial_rotary_factor
//   (default 0.5) features rotate in the half-split ("rotate_half") pairing — unlike dense
//   GLM-4, whose pairs are interleaved;
// - the first first_k_dense_replace layers use a dense SwiGLU MLP (intermediate_size), the
//   rest an MoE: sigmoid router, noaux_tc top-k with e_score_correction_bias steering the
//   selection only, n_group / topk_group group limiting, renormalised weights (+1e-20)
//   times routed_scaling_factor, plus n_shared_experts shared experts as one MLP;
// - num_nextn_predict_layers multi-token-prediction layers (stored after the last decoder
//   layer) are not part of next-token decoding and are left unused.
#include <memory>

#include "core/error.h"
#include "io/json_fields.h"
#include "model/arch/families.h"
#include "model/layers/gated_mlp.h"
#include "model/layers/moe/moe_layer.h"
#include "parallel/communicator.h"

namespace deepinfer::model {
namespace {

// Glm4MoeConfig defaults that differ from the generic ones ModelConfig::parse assumes.
io::ModelConfig with_glm4_moe_defaults(io::ModelConfig config) {
  const nlohmann::json& raw = config.raw;
  const std::string source = config.architecture + " config.json";
  const io::JsonFields f(raw, source);
  if (!rope_setting_given(config, "partial_rotary_factor")) config.partial_rotary_factor = 0.5;
  if (!f.has("rms_norm_eps")) config.rms_norm_eps = 1e-5;
  if (!f.has("num_key_value_heads")) {
    config.num_key_value_heads = 8;
    DI_CHECK(config.num_attention_heads % 8 == 0, source,
             ": num_key_value_heads is absent, so GLM-4.5's default 8 applies, but it does not "
             "divide num_attention_heads ",
             config.num_attention_heads, "; set num_key_value_heads");
  }
  if (!f.has("intermediate_size")) config.intermediate_size = 10944;
  const double rotary = static_cast<double>(config.head_dim) * config.partial_rotary_factor;
  const auto rotary_dim = static_cast<int64_t>(rotary);
  DI_CHECK(rotary_dim >= 2 && rotary_dim % 2 == 0, source, ": head_dim ", config.head_dim,
           " * partial_rotary_factor ", config.partial_rotary_factor, " gives ", rotary,
           " rotary features; an even number >= 2 is needed");
  return config;
}

}  // namespace

std::unique_ptr<CausalLM> build_glm4_moe(const io::ModelConfig& file_config,
                                         WeightLoader& weights) {
  const io::ModelConfig config = with_glm4_moe_defaults(file_config);
  const std::string source = config.architecture + " config.json";
  const io::JsonFields f(config.raw, source);

  MoeConfig moe;
  moe.hidden = config.hidden_size;
  moe.intermediate = f.positive("moe_intermediate_size").value_or(1408);
  moe.router.num_experts = f.has("n_routed_experts")
                               ? *f.positive("n_routed_experts")
                               : f.positive("num_local_experts").value_or(128);
  moe.router.top_k = f.positive("num_experts_per_tok").value_or(8);
  moe.router.scoring = RouterScoring::sigmoid;
  moe.router.method = TopkMethod::noaux_tc;
  moe.router.n_group = f.positive("n_group").value_or(1);
  moe.router.topk_group = f.positive("topk_group").value_or(1);
  moe.router.norm_topk_prob = f.boolean("norm_topk_prob").value_or(true);
  moe.router.norm_eps = 1e-20f;
  moe.router.routed_scaling_factor =
      static_cast<float>(f.number("routed_scaling_factor").value_or(1.0));
  moe.router.validate(source);
  const auto n_shared = f.integer("n_shared_experts").value_or(1);
  DI_CHECK(n_shared >= 0, source, ": n_shared_experts must be >= 0, got ", n_shared);
  moe.shared_intermediate = moe.intermediate * n_shared;
  const auto first_dense = f.integer("first_k_dense_replace").value_or(1);
  DI_CHECK(first_dense >= 0, source, ": first_k_dense_replace must be >= 0, got ", first_dense);

  const bool bias = config.attention_bias.value_or(false);
  const QkNorm qk_norm = f.boolean("use_qk_norm").value_or(false) ? QkNorm::per_head : QkNorm::none;
  // half-split partial rotary
  DecoderSpec spec =
      gqa_decoder_spec(config, {.attention = {.qkv_bias = bias, .qk_norm = qk_norm}});
  auto comm = weights.expert_group();
  const int64_t hidden = config.hidden_size;
  const int64_t intermediate = config.intermediate_size;
  spec.feed_forward = [=](WeightLoader& w, const std::string& prefix,
                          int64_t layer) -> std::unique_ptr<FeedForward> {
    if (layer >= first_dense) return MoeLayer::load(w, prefix + ".mlp", moe, comm);
    return GatedMlp::load(w, prefix + ".mlp", hidden, intermediate);
  };
  return std::make_unique<TransformerDecoder>(config, weights, std::move(spec));
}

}  // namespace deepinfer::model
