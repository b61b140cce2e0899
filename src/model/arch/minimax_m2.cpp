// MiniMax-M2 (MiniMaxM2ForCausalLM, 230B-A10B), after transformers' modeling_minimax_m2.py:
// - GQA attention without biases; q_norm / k_norm are RMSNorms over the WHOLE q (resp. k)
//   projection of a token, all heads at once (weights [heads * head_dim]), not per head, so
//   under tensor parallelism the sum of squares is all-reduced (QkNorm::whole_projection);
// - partial rotary in the half-split ("rotate_half") pairing over the first rotary_dim features
//   of each head: published configs give the legacy top-level `rotary_dim`, which transformers
//   turns into partial_rotary_factor = rotary_dim / head_dim unless one is given;
// - every layer an MoE without shared experts: sigmoid router, the top num_experts_per_tok
//   experts by score + e_score_correction_bias (selection only, no groups), their unbiased
//   scores renormalised (no epsilon, no routed scaling), SwiGLU experts of intermediate_size;
//   tensors keep Mixtral's names (block_sparse_moe.gate, block_sparse_moe.
//   e_score_correction_bias, block_sparse_moe.experts.{e}.w1 / w3 / w2), as transformers writes
//   them back;
// - MiniMaxM2Config defaults where ModelConfig's differ: head_dim 128, num_key_value_heads 8,
//   intermediate_size 1536, rope_theta 5e6.
// Keys of published configs that transformers reads no further are honoured by refusing any
// value other than the one it implements (use_qk_norm, qk_norm_type, scoring_func,
// use_routing_bias, shared_intermediate_size, attn_type_list).
#include <memory>

#include "core/error.h"
#include "io/json_fields.h"
#include "model/arch/families.h"
#include "model/layers/moe/moe_layer.h"
#include "parallel/communicator.h"

namespace deepinfer::model {
namespace {

// Values transformers' MiniMaxM2 does not implement (it ignores these keys), refused by name.
void refuse_unimplemented(const io::JsonFields& f) {
  if (!f.boolean("use_qk_norm").value_or(true))
    f.fail_key("use_qk_norm", "false is not supported (MiniMax-M2 always normalises q and k)");
  if (const auto type = f.string("qk_norm_type"); type && *type != "per_layer")
    f.fail_key("qk_norm_type", "\"", *type, "\" is not supported (only \"per_layer\")");
  if (const auto scoring = f.string("scoring_func"); scoring && *scoring != "sigmoid")
    f.fail_key("scoring_func", "\"", *scoring, "\" is not supported (only \"sigmoid\")");
  if (!f.boolean("use_routing_bias").value_or(true))
    f.fail_key("use_routing_bias",
               "false is not supported (the router always adds "
               "e_score_correction_bias)");
  if (const auto shared = f.integer("shared_intermediate_size"); shared && *shared != 0)
    f.fail_key("shared_intermediate_size", *shared,
               ": shared experts are not supported by MiniMax-M2 (expected 0)");
  if (const auto* types = f.find("attn_type_list")) {
    if (!types->is_array()) f.fail_key("attn_type_list", "expected a list, got ", types->dump());
    for (const auto& t : *types) {
      if (t != 1)
        f.fail_key("attn_type_list", "an entry ", t.dump(),
                   " asks for lightning (linear) attention, which is not supported (only 1: "
                   "softmax attention)");
    }
  }
  if (f.boolean("attention_bias").value_or(false))
    f.fail_key("attention_bias", "true is not supported (MiniMax-M2's projections have no bias)");
}

io::ModelConfig with_minimax_m2_defaults(io::ModelConfig config) {
  const std::string source = config.architecture + " config.json";
  const io::JsonFields f(config.raw, source);
  if (!f.has("head_dim")) config.head_dim = 128;
  if (!f.has("num_key_value_heads")) {
    config.num_key_value_heads = 8;
    DI_CHECK(config.num_attention_heads % 8 == 0, source,
             ": num_key_value_heads is absent, so MiniMax-M2's default 8 applies, but it does not "
             "divide num_attention_heads ",
             config.num_attention_heads, "; set num_key_value_heads");
  }
  if (!f.has("intermediate_size")) config.intermediate_size = 1536;
  if (!rope_setting_given(config, "rope_theta")) config.rope_theta = 5e6;
  const int64_t head_dim = config.head_dim;
  if (const auto rotary_dim = f.integer("rotary_dim")) {
    if (*rotary_dim < 2 || *rotary_dim > head_dim || *rotary_dim % 2 != 0)
      f.fail_key("rotary_dim", *rotary_dim, " must be even and in [2, head_dim = ", head_dim, "]");
    if (!rope_setting_given(config, "partial_rotary_factor")) {
      config.partial_rotary_factor =
          static_cast<double>(*rotary_dim) / static_cast<double>(head_dim);
    } else if (static_cast<int64_t>(static_cast<double>(head_dim) * config.partial_rotary_factor) !=
               *rotary_dim) {
      f.fail_key("rotary_dim", *rotary_dim, " contradicts partial_rotary_factor ",
                 config.partial_rotary_factor, " (head_dim ", head_dim, "); keep one of them");
    }
  }
  const double rotary = static_cast<double>(head_dim) * config.partial_rotary_factor;
  const auto rotary_features = static_cast<int64_t>(rotary);
  DI_CHECK(rotary_features >= 2 && rotary_features % 2 == 0, source, ": head_dim ", head_dim,
           " * partial_rotary_factor ", config.partial_rotary_factor, " gives ", rotary,
           " rotary features; an even number >= 2 is needed");
  return config;
}

}  // namespace

std::unique_ptr<CausalLM> build_minimax_m2(const io::ModelConfig& file_config,
                                           WeightLoader& weights) {
  const std::string source = file_config.architecture + " config.json";
  const io::JsonFields f(file_config.raw, source);
  refuse_unimplemented(f);
  const io::ModelConfig config = with_minimax_m2_defaults(file_config);

  MoeConfig moe;
  moe.hidden = config.hidden_size;
  moe.intermediate = config.intermediate_size;
  // MiniMaxM2Config maps num_experts to num_local_experts.
  moe.router.num_experts = f.has("num_local_experts") ? *f.positive("num_local_experts")
                                                      : f.positive("num_experts").value_or(256);
  moe.router.top_k = f.positive("num_experts_per_tok").value_or(8);
  moe.router.scoring = RouterScoring::sigmoid;
  moe.router.method = TopkMethod::noaux_tc;  // one group: the bias steers the selection only
  moe.router.norm_topk_prob = true;
  moe.router.validate(source);
  moe.names = MoeTensorNames::mixtral();

  DecoderSpec spec = gqa_decoder_spec(config, {.attention = {.qk_norm = QkNorm::whole_projection}});
  auto comm = weights.expert_group();
  spec.feed_forward = [=](WeightLoader& w, const std::string& prefix,
                          int64_t) -> std::unique_ptr<FeedForward> {
    return MoeLayer::load(w, prefix + ".block_sparse_moe", moe, comm);
  };
  return std::make_unique<TransformerDecoder>(config, weights, std::move(spec));
}

}  // namespace deepinfer::model
