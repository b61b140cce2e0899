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
#include "parallel/pipeline_split.h"

namespace deepinfer::model {
namespace {

// The MLA + DeepSeekMoE families and their transformers defaults where they differ.
struct Flavor {
  bool v3 = false;          // sigmoid + noaux_tc routing (V3 and every family after it)
  int64_t first_dense = 0;  // first_k_dense_replace when absent
  int64_t moe_intermediate = 1407;
  int64_t experts_per_token = 0;  // num_experts_per_tok when absent (0: required)
  double routed_scaling = 1.0;
  int64_t n_group = 0, topk_group = 0;
  int64_t shared_experts = 2;
  // Whether rope_interleave is read (V3, GLM-4.7-Flash); otherwise MLA always interleaves.
  bool reads_rope_interleave = false;
  // DeepSeek Sparse Attention: the indexer's rope layout and default head count.
  bool sparse = false;
  kernels::RopeLayout indexer_rope = kernels::RopeLayout::half_split;
  int64_t index_heads = 64;
  bool shared_topk_layers = false;  // GLM-5's indexer_types
};

Flavor flavor_of(const io::ModelConfig& config) {
  const std::string& a = config.architecture;
  const std::string& t = config.model_type;
  const auto is = [&](const char* arch, const char* type) {
    return a == arch || (a.empty() && t == type);
  };
  Flavor v3{.v3 = true,
            .first_dense = 3,
            .moe_intermediate = 2048,
            .experts_per_token = 8,
            .routed_scaling = 2.5,
            .n_group = 8,
            .topk_group = 4,
            .shared_experts = 1,
            .reads_rope_interleave = true};
  // Kimi-K2 / K2.5: DeepSeek-V3's text model (K2.5's under a vision wrapper, io/hf_config.cpp).
  if (is("DeepseekV3ForCausalLM", "deepseek_v3") || a == "KimiK25ForConditionalGeneration" ||
      a == "Kimi_K25ForConditionalGeneration")
    return v3;
  if (is("Glm4MoeLiteForCausalLM", "glm4_moe_lite")) {
    Flavor f = v3;
    f.first_dense = 1;
    f.moe_intermediate = 1536;
    f.experts_per_token = 4;
    f.routed_scaling = 1.8;
    f.n_group = f.topk_group = 1;
    return f;
  }
  if (is("DeepseekV32ForCausalLM", "deepseek_v32")) {
    Flavor f = v3;
    f.reads_rope_interleave = false;
    f.sparse = true;
    return f;
  }
  if (is("GlmMoeDsaForCausalLM", "glm_moe_dsa")) {
    Flavor f = v3;
    f.reads_rope_interleave = false;
    f.n_group = f.topk_group = 1;
    f.sparse = true;
    f.indexer_rope = kernels::RopeLayout::interleaved;
    f.index_heads = 32;
    f.shared_topk_layers = true;
    return f;
  }
  return {};  // DeepSeek-V2 / V2-Lite / V2.5
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
// transformers 5 configs also list mlp_layer_types ("dense" / "sparse" per layer), which then
// decide.
struct LayerPlan {
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  bool has_experts = false;
  std::vector<bool> sparse;  // from mlp_layer_types, when given
  bool is_moe(int64_t layer) const {
    if (!sparse.empty()) return has_experts && sparse[static_cast<size_t>(layer)];
    return has_experts && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
};

// A per-layer list of strings from config.json, each one of `a` (-> false) or `b` (-> true).
std::optional<std::vector<bool>> layer_list(const io::ModelConfig& config, const char* key,
                                            const char* a, const char* b) {
  const io::JsonFields f(config.raw, source_of(config));
  const auto it = config.raw.find(key);
  if (it == config.raw.end() || it->is_null()) return std::nullopt;
  if (!it->is_array() || static_cast<int64_t>(it->size()) != config.num_hidden_layers)
    f.fail_key(key, "must list one entry per layer (num_hidden_layers ", config.num_hidden_layers,
               ")");
  std::vector<bool> out;
  for (const auto& entry : *it) {
    if (!entry.is_string() || (entry != a && entry != b))
      f.fail_key(key, "entry ", entry.dump(), " is neither \"", a, "\" nor \"", b, "\"");
    out.push_back(entry == b);
  }
  return out;
}

LayerPlan layer_plan(const io::ModelConfig& config) {
  const io::JsonFields f(config.raw, source_of(config));
  LayerPlan plan;
  const auto first = f.integer("first_k_dense_replace").value_or(flavor_of(config).first_dense);
  if (first < 0) f.fail_key("first_k_dense_replace", "must be >= 0, got ", first);
  plan.first_k_dense_replace = first;
  plan.moe_layer_freq = f.positive("moe_layer_freq").value_or(1);
  plan.has_experts = f.has("n_routed_experts");
  if (auto types = layer_list(config, "mlp_layer_types", "dense", "sparse")) plan.sparse = *types;
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
  const Flavor flavor = flavor_of(config);
  const bool v3 = flavor.v3;
  MoeConfig moe;
  moe.hidden = config.hidden_size;
  moe.intermediate = f.positive("moe_intermediate_size").value_or(flavor.moe_intermediate);
  RouterConfig& r = moe.router;
  r.num_experts = f.required_positive("n_routed_experts");
  if (!f.has("num_experts_per_tok") && !v3) {
    f.fail_key("num_experts_per_tok", "missing (required by DeepSeek-V2 MoE layers)");
  }
  r.top_k = f.positive("num_experts_per_tok").value_or(flavor.experts_per_token);
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
    r.n_group =
        v3 ? f.positive("n_group").value_or(flavor.n_group) : f.required_positive("n_group");
    r.topk_group = v3 ? f.positive("topk_group").value_or(flavor.topk_group)
                      : f.required_positive("topk_group");
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
      static_cast<float>(f.number("routed_scaling_factor").value_or(flavor.routed_scaling));
  r.validate(source);
  const auto shared = f.integer("n_shared_experts").value_or(flavor.shared_experts);
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

// DeepSeek Sparse Attention: the indexer geometry and which layers run an indexer (GLM-5's
// "shared" layers reuse the top-k of the indexer layer before them).
struct SparsePlan {
  DsaShape shape;
  std::vector<bool> indexer_layers;
};

// GLM-5's indexer_types, or what transformers derives when absent: index_topk_pattern
// ("F" full / "S" shared per layer) or the index_topk_freq / index_skip_topk_offset schedule.
std::vector<bool> glm_indexer_layers(const io::ModelConfig& config) {
  const io::JsonFields f(config.raw, source_of(config));
  if (auto types = layer_list(config, "indexer_types", "shared", "full")) return *types;
  const int64_t n = config.num_hidden_layers;
  std::vector<bool> full(static_cast<size_t>(n), true);
  if (const auto pattern = f.string("index_topk_pattern")) {
    if (static_cast<int64_t>(pattern->size()) != n)
      f.fail_key("index_topk_pattern", "has ", pattern->size(), " letters for ", n, " layers");
    for (int64_t i = 0; i < n; ++i) {
      const char c = (*pattern)[static_cast<size_t>(i)];
      if (c != 'F' && c != 'S') f.fail_key("index_topk_pattern", "letter '", c, "' is not F or S");
      full[static_cast<size_t>(i)] = c == 'F';
    }
    return full;
  }
  const int64_t freq = std::max<int64_t>(f.integer("index_topk_freq").value_or(1), 1);
  const int64_t offset = f.integer("index_skip_topk_offset").value_or(2);
  for (int64_t i = 0; i < n; ++i)
    full[static_cast<size_t>(i)] = std::max<int64_t>(i - offset + 1, 0) % freq == 0;
  return full;
}

SparsePlan sparse_plan(const io::ModelConfig& config, const MlaShape& mla, const Flavor& flavor) {
  const io::JsonFields f(config.raw, source_of(config));
  SparsePlan plan;
  DsaShape& d = plan.shape;
  d.hidden = config.hidden_size;
  d.q_lora_rank = mla.q_lora_rank;
  d.heads = f.positive("index_n_heads").value_or(flavor.index_heads);
  d.head_dim = f.positive("index_head_dim").value_or(128);
  d.topk = f.positive("index_topk").value_or(2048);
  d.rope_dim = mla.qk_rope_head_dim;
  d.rope_layout = flavor.indexer_rope;
  if (mla.q_lora_rank <= 0)
    f.fail_key("q_lora_rank", "is null, but the sparse-attention indexer reads the q LoRA latent");
  if (d.rope_dim > d.head_dim)
    f.fail_key("index_head_dim", d.head_dim, " is smaller than qk_rope_head_dim ", d.rope_dim,
               " (the indexer rotates that many leading features)");
  plan.indexer_layers =
      flavor.shared_topk_layers
          ? glm_indexer_layers(config)
          : std::vector<bool>(static_cast<size_t>(config.num_hidden_layers), true);
  if (!plan.indexer_layers.empty() && !plan.indexer_layers.front())
    f.fail_key(flavor.shared_topk_layers ? "indexer_types" : "index_topk",
               "layer 0 must run its own indexer (a shared layer reuses the layer before)");
  return plan;
}

// Under pipeline parallelism a stage must start with an indexer layer: a shared layer reads
// the top-k its predecessor chose in the same process.
void check_stage_start(const io::ModelConfig& config, const WeightLoader& weights,
                       const std::vector<bool>& indexer_layers) {
  const parallel::ParallelContext* parallel = weights.parallel();
  if (parallel == nullptr || parallel->pipeline_parallel_size() <= 1) return;
  const parallel::LayerRange range = parallel::pipeline_layers(
      config.num_hidden_layers, parallel->pipeline_stage(), parallel->pipeline_parallel_size());
  DI_CHECK(range.size() == 0 || indexer_layers[static_cast<size_t>(range.begin)], source_of(config),
           ": pipeline stage ", parallel->pipeline_stage(), " starts at layer ", range.begin,
           ", which reuses the indexer top-k of layer ", range.begin - 1,
           " on another stage; choose a pipeline size whose stages start at indexer layers");
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
  // transformers 5's DeepseekV2Attention always rotates adjacent pairs, and so do V3.2's and
  // GLM-5's; V3 and GLM-4.7-Flash read rope_interleave.
  const bool interleave =
      !flavor_of(config).reads_rope_interleave || f.boolean("rope_interleave").value_or(true);
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
  const Flavor flavor = flavor_of(config);
  if (!flavor.sparse) {
    spec.attention = [mla, form](WeightLoader& w, const std::string& prefix, int64_t) {
      return MlaAttention::load(w, prefix + ".self_attn", mla, form);
    };
  } else {
    const SparsePlan sparse = sparse_plan(config, mla, flavor);
    check_stage_start(config, weights, sparse.indexer_layers);
    spec.kv_layout.index_dim = sparse.shape.head_dim;
    spec.kv_layout.index_layers = sparse.indexer_layers;
    auto selection = std::make_shared<DsaSelection>();
    spec.attention = [mla, form, sparse, selection](WeightLoader& w, const std::string& prefix,
                                                    int64_t layer) {
      MlaSparsity sparsity;
      sparsity.selection = selection;
      if (sparse.indexer_layers[static_cast<size_t>(layer)]) sparsity.indexer = sparse.shape;
      return MlaAttention::load(w, prefix + ".self_attn", mla, form, std::move(sparsity));
    };
  }
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

std::unique_ptr<CausalLM> build_deepseek_v32(const io::ModelConfig& config, WeightLoader& weights) {
  return build_deepseek(config, weights, {});
}

std::unique_ptr<CausalLM> build_glm_moe_dsa(const io::ModelConfig& config, WeightLoader& weights) {
  return build_deepseek(config, weights, {});
}

std::unique_ptr<CausalLM> build_kimi_k25(const io::ModelConfig& config, WeightLoader& weights) {
  return build_deepseek(config, weights, {});
}

std::unique_ptr<CausalLM> build_glm4_moe_lite(const io::ModelConfig& config,
                                              WeightLoader& weights) {
  return build_deepseek(config, weights, {});
}

}  // namespace deepinfer::model
