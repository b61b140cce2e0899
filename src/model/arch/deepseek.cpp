#include "model/arch/deepseek.h"

#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "io/json_fields.h"
#include "model/arch/families.h"
#include "model/arch/transformer_decoder.h"
#include "model/layers/gated_mlp.h"
#include "model/layers/moe/moe_layer.h"
#include "parallel/communicator.h"

namespace deepinfer::model {
namespace {

bool is_v3(const io::ModelConfig& config) {
  return config.architecture == "DeepseekV3ForCausalLM" ||
         (config.architecture.empty() && config.model_type == "deepseek_v3");
}

std::string source_of(const io::ModelConfig& config) {
  return config.architecture + " config.json";
}

// transformers' yarn_get_mscale.
double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// Which layers are MoE: DeepSeek's rule, layer >= first_k_dense_replace and on the
// moe_layer_freq grid (every published config has freq 1, the only case transformers reads).
// A config without n_routed_experts is all dense, as in DeepSeek's reference code.
struct LayerPlan {
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  bool has_experts = false;
  bool is_moe(int64_t layer) const {
    return has_experts && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
};

LayerPlan layer_plan(const io::ModelConfig& config) {
  const io::JsonFields f(config.raw, source_of(config));
  LayerPlan plan;
  const auto first = f.integer("first_k_dense_replace").value_or(is_v3(config) ? 3 : 0);
  if (first < 0) f.fail_key("first_k_dense_replace", "must be >= 0, got ", first);
  plan.first_k_dense_replace = first;
  plan.moe_layer_freq = f.positive("moe_layer_freq").value_or(1);
  plan.has_experts = f.has("n_routed_experts");
  return plan;
}

// DeepSeekMoE as transformers 5 computes it. V2: softmax scores, greedy or
// group_limited_greedy (group score = its best expert), weights x routed_scaling_factor.
// V3: sigmoid, noaux_tc (e_score_correction_bias for selection only, group score = sum of its
// top-2), renormalised (+1e-20) when norm_topk_prob, x routed_scaling_factor. Both add
// n_shared_experts shared experts as one MLP of n_shared x moe_intermediate_size.
MoeConfig moe_config(const io::ModelConfig& config) {
  const std::string source = source_of(config);
  const io::JsonFields f(config.raw, source);
  const bool v3 = is_v3(config);
  MoeConfig moe;
  moe.hidden = config.hidden_size;
  moe.intermediate = f.positive("moe_intermediate_size").value_or(v3 ? 2048 : 1407);
  RouterConfig& r = moe.router;
  r.num_experts = f.required_positive("n_routed_experts");
  if (!f.has("num_experts_per_tok") && !v3) {
    f.fail_key("num_experts_per_tok", "missing (required by DeepSeek-V2 MoE layers)");
  }
  r.top_k = f.positive("num_experts_per_tok").value_or(8);
  const std::string scoring = f.string("scoring_func").value_or(v3 ? "sigmoid" : "softmax");
  r.scoring = parse_scoring(scoring, source);
  if (r.scoring != (v3 ? RouterScoring::sigmoid : RouterScoring::softmax)) {
    f.fail_key("scoring_func", "\"", scoring, "\" is not what ", config.architecture, " computes (",
               v3 ? "sigmoid" : "softmax", ")");
  }
  const std::string method = f.string("topk_method").value_or(v3 ? "noaux_tc" : "greedy");
  r.method = parse_topk_method(method, source);
  if (v3 ? r.method != TopkMethod::noaux_tc : r.method == TopkMethod::noaux_tc) {
    f.fail_key("topk_method", "\"", method, "\" is not supported by ", config.architecture,
               v3 ? " (it always routes with noaux_tc)"
                  : " (greedy or group_limited_greedy; noaux_tc is DeepSeek-V3's)");
  }
  if (r.method != TopkMethod::greedy) {
    r.n_group = v3 ? f.positive("n_group").value_or(8) : f.required_positive("n_group");
    r.topk_group = v3 ? f.positive("topk_group").value_or(4) : f.required_positive("topk_group");
  }
  if (v3) {
    r.norm_topk_prob = f.boolean("norm_topk_prob").value_or(true);
    r.norm_eps = 1e-20f;
  } else if (f.boolean("norm_topk_prob").value_or(false)) {
    // transformers 5 ignores it for V2 while DeepSeek's reference code renormalises; no
    // published V2 checkpoint sets it, so refuse rather than pick one silently.
    f.fail_key("norm_topk_prob",
               "true is not supported for DeepseekV2ForCausalLM (transformers ignores it, "
               "DeepSeek's reference code renormalises); set it to false");
  }
  r.routed_scaling_factor =
      static_cast<float>(f.number("routed_scaling_factor").value_or(v3 ? 2.5 : 1.0));
  r.validate(source);
  const auto shared = f.integer("n_shared_experts").value_or(v3 ? 1 : 2);
  if (shared < 0) f.fail_key("n_shared_experts", "must be >= 0, got ", shared);
  moe.shared_intermediate = moe.intermediate * shared;
  return moe;
}

// DeepSeek-V3's multi-token-prediction modules follow the decoder layers in the checkpoint.
void skip_mtp_layers(const io::ModelConfig& config, WeightLoader& weights) {
  const io::JsonFields f(config.raw, source_of(config));
  const int64_t mtp = f.integer("num_nextn_predict_layers").value_or(0);
  int64_t skipped = 0;
  for (int64_t i = 0; i < mtp; ++i) {
    skipped +=
        weights.skip_prefix("model.layers." + std::to_string(config.num_hidden_layers + i) + ".");
  }
  if (skipped > 0) {
    log::info(weights.checkpoint().dir(), ": skipping ", skipped, " tensors of ", mtp,
              " multi-token-prediction layer(s) (model.layers.", config.num_hidden_layers,
              ".*): speculative decoding with them is not supported yet");
  }
}

// MLA widths: transformers' defaults when absent; q_lora_rank: null means no q LoRA.
int64_t dim(const io::JsonFields& f, const char* key, int64_t fallback) {
  return f.positive(key).value_or(fallback);
}

}  // namespace

MlaShape deepseek_mla_shape(const io::ModelConfig& config) {
  const io::JsonFields f(config.raw, source_of(config));
  DI_CHECK(config.hidden_act == "silu", source_of(config), ": hidden_act '", config.hidden_act,
           "' is not supported by ", config.architecture, " (expected silu)");
  if (config.num_key_value_heads != config.num_attention_heads) {
    f.fail_key("num_key_value_heads", config.num_key_value_heads,
               " differs from num_attention_heads ", config.num_attention_heads,
               "; MLA expands one latent into every head, so they must be equal");
  }
  if (config.partial_rotary_factor != 1.0) {
    f.fail_key("partial_rotary_factor", config.partial_rotary_factor,
               " is not supported by MLA (qk_rope_head_dim is the rotary width)");
  }
  MlaShape s;
  s.hidden = config.hidden_size;
  s.heads = config.num_attention_heads;
  const auto q_lora = config.raw.find("q_lora_rank");
  s.q_lora_rank = q_lora != config.raw.end() && q_lora->is_null() ? 0 : dim(f, "q_lora_rank", 1536);
  s.kv_lora_rank = dim(f, "kv_lora_rank", 512);
  s.qk_nope_head_dim = dim(f, "qk_nope_head_dim", 128);
  s.qk_rope_head_dim = dim(f, "qk_rope_head_dim", 64);
  s.v_head_dim = dim(f, "v_head_dim", 128);
  if (s.qk_rope_head_dim % 2 != 0) f.fail_key("qk_rope_head_dim", "must be even");
  s.bias = config.attention_bias.value_or(false);
  // transformers 5's DeepseekV2Attention always rotates adjacent pairs; V3 reads rope_interleave.
  const bool interleave = !is_v3(config) || f.boolean("rope_interleave").value_or(true);
  s.rope_layout = interleave ? kernels::RopeLayout::interleaved : kernels::RopeLayout::half_split;
  // yarn_apply_mscale: any non-default rope type with mscale_all_dim scales the softmax by
  // mscale(factor, mscale_all_dim)^2 (the rope tables carry the mscale / mscale_all_dim ratio).
  double scale = 1.0 / std::sqrt(static_cast<double>(s.qk_head_dim()));
  const auto& rope = config.rope_scaling;
  if (rope.type != "default" && !rope.type.empty() && rope.mscale_all_dim != 0.0) {
    const double m = yarn_mscale(rope.factor, rope.mscale_all_dim);
    scale *= m * m;
  }
  s.softmax_scale = static_cast<float>(scale);
  return s;
}

std::unique_ptr<CausalLM> build_deepseek(const io::ModelConfig& config, WeightLoader& weights,
                                         const DeepseekOptions& options) {
  const MlaShape mla = deepseek_mla_shape(config);
  const LayerPlan plan = layer_plan(config);
  MoeConfig moe;
  if (plan.has_experts) moe = moe_config(config);
  DecoderSpec spec;
  spec.rotary_dim = mla.qk_rope_head_dim;
  // One K-only "head" per token and layer: the latent and the roped shared key.
  spec.kv_layout = {config.num_hidden_layers, 1, mla.cache_width(), 0,
                    std::gcd(mla.kv_lora_rank, mla.qk_rope_head_dim)};
  const MlaForm form = options.mla_form;
  spec.attention = [mla, form](WeightLoader& w, const std::string& prefix, int64_t) {
    return MlaAttention::load(w, prefix + ".self_attn", mla, form);
  };
  auto comm = weights.expert_group();
  const int64_t hidden = config.hidden_size;
  const int64_t intermediate = config.intermediate_size;
  const std::string source = source_of(config);
  spec.feed_forward = [=](WeightLoader& w, const std::string& prefix,
                          int64_t layer) -> std::unique_ptr<FeedForward> {
    if (plan.is_moe(layer)) return MoeLayer::load(w, prefix + ".mlp", moe, comm);
    DI_CHECK(intermediate > 0, source,
             ": intermediate_size: missing (required by the dense layers)");
    return GatedMlp::load(w, prefix + ".mlp", hidden, intermediate);
  };
  auto model = std::make_unique<TransformerDecoder>(config, weights, std::move(spec));
  skip_mtp_layers(config, weights);
  return model;
}

std::unique_ptr<CausalLM> build_deepseek_v2(const io::ModelConfig& config, WeightLoader& weights) {
  return build_deepseek(config, weights, {});
}

std::unique_ptr<CausalLM> build_deepseek_v3(const io::ModelConfig& config, WeightLoader& weights) {
  return build_deepseek(config, weights, {});
}

}  // namespace deepinfer::model
