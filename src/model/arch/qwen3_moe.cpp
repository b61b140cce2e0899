// Qwen3-MoE (Qwen3MoeForCausalLM, e.g. Qwen3-30B-A3B, Qwen3-235B-A22B), after transformers'
// modeling_qwen3_moe.py: Qwen3 attention (per-head q/k RMSNorm) and, in layer i, a sparse
// MoE block (softmax router, greedy top-k, optional renormalisation without epsilon, no
// shared experts, no scaling) when i is not in mlp_only_layers and (i + 1) is a multiple of
// decoder_sparse_step; a dense SwiGLU MLP of intermediate_size otherwise.
#include <algorithm>
#include <memory>
#include <vector>

#include "core/error.h"
#include "io/json_fields.h"
#include "model/arch/families.h"
#include "model/layers/gated_mlp.h"
#include "model/layers/moe/moe_layer.h"
#include "parallel/communicator.h"

namespace deepinfer::model {

std::unique_ptr<CausalLM> build_qwen3_moe(const io::ModelConfig& file_config,
                                          WeightLoader& weights) {
  io::ModelConfig config = file_config;
  const std::string source = config.architecture + " config.json";
  const io::JsonFields f(config.raw, source);
  // Qwen3MoeConfig's default differs from the generic num_key_value_heads = heads.
  if (!f.has("num_key_value_heads")) {
    config.num_key_value_heads = 4;
    DI_CHECK(config.num_attention_heads % 4 == 0, source,
             ": num_key_value_heads is absent, so Qwen3-MoE's default 4 applies, but it does not "
             "divide num_attention_heads ",
             config.num_attention_heads, "; set num_key_value_heads");
  }
  if (f.boolean("use_sliding_window").value_or(false)) {
    f.fail_key("use_sliding_window", "sliding-window attention is not supported; set it to false");
  }
  // transformers 5 writes num_local_experts; published checkpoints say num_experts.
  const int64_t num_experts =
      f.has("num_experts") ? *f.integer("num_experts") : f.integer("num_local_experts").value_or(0);
  DI_CHECK(num_experts >= 0, source, ": num_experts must be >= 0, got ", num_experts);
  const int64_t sparse_step = f.positive("decoder_sparse_step").value_or(1);
  std::vector<int64_t> mlp_only;
  if (const auto* list = f.find("mlp_only_layers")) {
    if (!list->is_array()) f.fail_key("mlp_only_layers", "expected a list of layer indices");
    for (const auto& v : *list) {
      if (!v.is_number_integer())
        f.fail_key("mlp_only_layers", "expected integers, got ", v.dump());
      mlp_only.push_back(v.get<int64_t>());
    }
  }
  const bool bias = config.attention_bias.value_or(false);
  DecoderSpec spec =
      gqa_decoder_spec(config, {.attention = {.qkv_bias = bias, .qk_norm = QkNorm::per_head}});

  auto is_sparse = [=](int64_t layer) {
    return num_experts > 0 && (layer + 1) % sparse_step == 0 &&
           std::find(mlp_only.begin(), mlp_only.end(), layer) == mlp_only.end();
  };
  bool any_sparse = false, any_dense = false;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    (is_sparse(i) ? any_sparse : any_dense) = true;
  }
  MoeConfig moe;
  if (any_sparse) {
    moe.hidden = config.hidden_size;
    moe.intermediate = f.required_positive("moe_intermediate_size");
    moe.router.num_experts = num_experts;
    moe.router.top_k = f.required_positive("num_experts_per_tok");
    moe.router.scoring = RouterScoring::softmax;
    moe.router.method = TopkMethod::greedy;
    moe.router.norm_topk_prob = f.boolean("norm_topk_prob").value_or(false);
    moe.router.validate(source);
  }
  DI_CHECK(!any_dense || config.intermediate_size > 0, source,
           ": intermediate_size is required for the dense (mlp_only / non-sparse) layers");

  auto comm = weights.expert_group();
  const int64_t hidden = config.hidden_size;
  const int64_t intermediate = config.intermediate_size;
  spec.feed_forward = [=](WeightLoader& w, const std::string& prefix,
                          int64_t layer) -> std::unique_ptr<FeedForward> {
    if (is_sparse(layer)) return MoeLayer::load(w, prefix + ".mlp", moe, comm);
    return GatedMlp::load(w, prefix + ".mlp", hidden, intermediate);
  };
  return std::make_unique<TransformerDecoder>(config, weights, std::move(spec));
}

}  // namespace deepinfer::model
