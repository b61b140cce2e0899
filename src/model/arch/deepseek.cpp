#include "model/arch/deepseek.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "io/json_fields.h"
#include "model/arch/families.h"
#include "model/arch/transformer_decoder.h"
#include "model/layers/gated_mlp.h"

namespace deepinfer::model {
namespace {

bool is_v3(const io::ModelConfig& config) {
  return config.architecture == "DeepseekV3ForCausalLM" ||
         (config.architecture.empty() && config.model_type == "deepseek_v3");
}

io::JsonFields fields(const io::ModelConfig& config) {
  return io::JsonFields(config.raw, "config.json");
}

int64_t required(const io::JsonFields& f, const char* key) {
  return f.required_positive(key);
}

// transformers' yarn_get_mscale.
double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// Which layers are MoE: DeepSeek's rule (layer >= first_k_dense_replace and on the
// moe_layer_freq grid; every published config has freq 1, which is all transformers reads).
struct LayerPlan {
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  bool has_experts = false;
  bool is_moe(int64_t layer) const {
    return has_experts && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
};

LayerPlan layer_plan(const io::ModelConfig& config) {
  const auto f = fields(config);
  LayerPlan plan;
  const auto first = f.integer("first_k_dense_replace").value_or(0);
  if (first < 0) f.fail_key("first_k_dense_replace", "must be >= 0, got ", first);
  plan.first_k_dense_replace = first;
  plan.moe_layer_freq = f.positive("moe_layer_freq").value_or(1);
  plan.has_experts = f.has("n_routed_experts");
  return plan;
}

std::unique_ptr<FeedForward> build_moe(const io::ModelConfig& config, WeightLoader&,
                                       const std::string& prefix) {
  fail(prefix, ": ", config.architecture,
       " MoE layers are not available in this build yet (only layers below "
       "first_k_dense_replace, which are dense, can be loaded)");
}

// DeepSeek-V3's multi-token-prediction modules follow the decoder layers in the checkpoint.
void skip_mtp_layers(const io::ModelConfig& config, WeightLoader& weights) {
  const auto f = fields(config);
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

}  // namespace

MlaShape deepseek_mla_shape(const io::ModelConfig& config) {
  const auto f = fields(config);
  DI_CHECK(config.hidden_act == "silu", "config.json: hidden_act '", config.hidden_act,
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
  s.q_lora_rank = f.positive("q_lora_rank").value_or(0);  // null: V2-Lite's q_proj
  s.kv_lora_rank = required(f, "kv_lora_rank");
  s.qk_nope_head_dim = required(f, "qk_nope_head_dim");
  s.qk_rope_head_dim = required(f, "qk_rope_head_dim");
  s.v_head_dim = required(f, "v_head_dim");
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
  DecoderSpec spec;
  spec.rotary_dim = mla.qk_rope_head_dim;
  // One K-only "head" per token and layer: the latent and the roped shared key.
  spec.kv_layout = {config.num_hidden_layers, 1, mla.cache_width(), 0};
  const MlaForm form = options.mla_form;
  spec.attention = [mla, form](WeightLoader& w, const std::string& prefix, int64_t) {
    return MlaAttention::load(w, prefix + ".self_attn", mla, form);
  };
  const io::ModelConfig cfg = config;
  spec.feed_forward = [cfg, plan](WeightLoader& w, const std::string& prefix,
                                  int64_t layer) -> std::unique_ptr<FeedForward> {
    if (plan.is_moe(layer)) return build_moe(cfg, w, prefix + ".mlp");
    DI_CHECK(cfg.intermediate_size > 0, "config.json: intermediate_size: missing (required by ",
             cfg.architecture, "'s dense layers)");
    return GatedMlp::load(w, prefix + ".mlp", cfg.hidden_size, cfg.intermediate_size);
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
