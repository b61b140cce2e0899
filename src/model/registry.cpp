#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "io/w8a8_checkpoint.h"
#include "model/arch/families.h"
#include "model/causal_lm.h"
#include "parallel/pipeline_split.h"

namespace deepinfer::model {

const std::vector<ModelFamily>& model_families() {
  // Adding a family: one arch file and one line here.
  static const std::vector<ModelFamily> families = {
      {"Qwen2ForCausalLM", build_qwen2},
      {"Qwen3ForCausalLM", build_qwen3},
      {"Qwen3MoeForCausalLM", build_qwen3_moe},
      {"LlamaForCausalLM", build_llama},
      {"MistralForCausalLM", build_mistral},
      {"Glm4MoeForCausalLM", build_glm4_moe},
      {"MiniMaxM2ForCausalLM", build_minimax_m2},
      {"GlmForCausalLM", build_glm},
      {"Glm4ForCausalLM", build_glm4},
      {"DeepseekV2ForCausalLM", build_deepseek_v2},
      {"DeepseekV3ForCausalLM", build_deepseek_v3},
      {"DeepseekV32ForCausalLM", build_deepseek_v32},
      {"GlmMoeDsaForCausalLM", build_glm_moe_dsa},
      {"Glm4MoeLiteForCausalLM", build_glm4_moe_lite},
      {"KimiK25ForConditionalGeneration", build_kimi_k25},
      {"Kimi_K25ForConditionalGeneration", build_kimi_k25},
  };
  return families;
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& family : model_families()) names.push_back(family.architecture);
  return names;
}

namespace {

// What this rank holds under expert parallelism: its routed experts and its weights' bytes
// (a fused expert tensor counts whole, though only this rank's slice of it is touched).
void log_expert_placement(const CausalLM& model, const WeightLoader& weights,
                          const parallel::ParallelContext& parallel,
                          const io::Checkpoint& checkpoint) {
  const auto loads = model.expert_load();
  int64_t moe_layers = 0, experts = 0;
  for (const auto& layer : loads) {
    if (layer.empty()) continue;
    ++moe_layers;
    experts = static_cast<int64_t>(layer.size());
  }
  const int64_t ep = parallel.expert_parallel_size();
  const int64_t per_rank = experts / std::max<int64_t>(ep, 1);
  const int64_t first = per_rank * parallel.expert_group()->rank();
  const std::string bytes =
      str_cat("weights on this rank: ", describe_weight_bytes(weights.loaded_bytes()),
              " (the whole checkpoint:",
              describe_weight_bytes({{"", static_cast<int64_t>(checkpoint.total_bytes())}}), ")");
  if (moe_layers == 0) {  // a dense model: tensor parallelism only
    log::info("tensor parallel ", parallel.describe(), ": ", model.kv_layout().kv_heads,
              " KV heads in this rank's cache; ", bytes);
    return;
  }
  const parallel::EplbOptions& eplb = weights.moe_options().eplb;
  const std::string held =
      eplb.num_redundant_experts > 0 || !eplb.load_file.empty()
          ? str_cat("routed experts placed by EPLB (", (experts + eplb.num_redundant_experts) / ep,
                    " slots per rank, ", eplb.num_redundant_experts, " redundant)")
          : str_cat("routed experts ", first, "-", first + per_rank - 1);
  log::info("expert parallel ", parallel.describe(), ": ", held, " of ", experts, " in each of ",
            moe_layers, " MoE layers; ", bytes);
}

// What this rank holds under pipeline parallelism: its stage's layers and their weights.
void log_stage_placement(const io::ModelConfig& config, const WeightLoader& weights,
                         const parallel::ParallelContext& parallel,
                         const io::Checkpoint& checkpoint) {
  const int64_t stage = parallel.pipeline_stage();
  const int64_t stages = parallel.pipeline_parallel_size();
  const parallel::LayerRange range =
      parallel::pipeline_layers(config.num_hidden_layers, stage, stages);
  std::string ends;
  if (parallel.first_stage()) ends += ", the embedding";
  if (parallel.last_stage()) ends += ", the final norm and lm_head";
  log::info("pipeline parallel ", parallel.describe(), ": decoder layers ", range.begin, "-",
            range.end - 1, " of ", config.num_hidden_layers, ends,
            "; weights on this rank: ", describe_weight_bytes(weights.loaded_bytes()),
            " (the whole checkpoint:",
            describe_weight_bytes({{"", static_cast<int64_t>(checkpoint.total_bytes())}}), ")");
}

}  // namespace

namespace {

const ModelFamily& family_of(const io::ModelConfig& config, const std::string& dir) {
  const auto& families = model_families();
  const auto family = std::find_if(families.begin(), families.end(), [&](const ModelFamily& f) {
    return f.architecture == config.architecture;
  });
  if (family == families.end()) {
    std::string supported;
    for (const auto& name : supported_architectures()) supported += " " + name;
    fail(dir, "/config.json: architecture '", config.architecture,
         "' is not supported (supported:", supported, ")");
  }
  return *family;
}

}  // namespace

std::unique_ptr<CausalLM> build_model(const io::ModelConfig& config, WeightLoader& weights) {
  const std::string& dir = weights.checkpoint().dir();
  const ModelFamily& family = family_of(config, dir);
  // An int8 channel-wise checkpoint's I8 weights load with their scales by themselves
  // (WeightLoader::load_int8); any other quantization_config is FP8's to judge.
  if (!io::parse_w8a8_quantization(config, dir + "/config.json"))
    weights.set_fp8(io::parse_fp8_quantization(config, dir + "/config.json"));
  return family.build(config, weights);
}

LoadOptions shaped_load_options(const LoadOptions& options, const io::ModelConfig& config) {
  LoadOptions shaped = options;
  if (shaped.quantization)  // q4_k_m picks types by layer (model/weight_quantization.h)
    shaped.quantization = with_model_shape(*shaped.quantization, config);
  return shaped;
}

std::unique_ptr<CausalLM> load_model(const std::string& dir, const LoadOptions& options,
                                     LoadReport* report) {
  const io::ModelConfig config = io::ModelConfig::load(dir);
  family_of(config, dir);  // an unsupported architecture is named before any weight is opened
  // A conversion into per-rank shards (deepinfer convert --tp-size / --ep-size) keeps each
  // rank's weights in its own directory: this rank maps only its own.
  const parallel::ParallelContext* parallel = options.parallel.get();
  const std::string rank_dir =
      parallel ? io::rank_checkpoint_dir(dir, parallel->rank(), parallel->world_size(),
                                         parallel->tensor_parallel_size(),
                                         parallel->expert_parallel_size())
               : io::rank_checkpoint_dir(dir, 0, 1);
  if (rank_dir != dir)
    log::info(dir, ": rank ", parallel ? parallel->rank() : 0, " maps its shard ", rank_dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(rank_dir, options.memory);
  WeightLoader weights(checkpoint, shaped_load_options(options, config));
  auto model = build_model(config, weights);
  model->set_eplb_state(weights.made_eplb_state());
  if (const std::string blocks = weights.block_summary(); !blocks.empty())
    log::info(dir, ": ", blocks);
  const std::string quantization = weights.quantization_summary();
  if (!quantization.empty()) {
    log::info(dir, ": ", quantization);
    log::info(dir, ": weights in memory: ", describe_weight_bytes(weights.loaded_bytes()));
  }
  if (report) *report = {weights.loaded_bytes(), quantization};
  if (options.parallel && (options.parallel->expert_parallel_size() > 1 ||
                           options.parallel->tensor_parallel_size() > 1))
    log_expert_placement(*model, weights, *options.parallel, checkpoint);
  if (options.parallel && options.parallel->pipeline_parallel_size() > 1)
    log_stage_placement(config, weights, *options.parallel, checkpoint);
  const auto unused = weights.unused();
  if (!unused.empty()) {
    log::warn(dir, ": ", unused.size(), " checkpoint tensors are not used by ", config.architecture,
              " (first: ", unused.front(), ")");
  }
  return model;
}

int64_t kv_quant_group(const KvLayout& layout) {
  // At most 32 elements per scale (as llama.cpp's q8_0): one scale per 128-wide head lets a
  // few outlier channels (RoPE dims of K) coarsen every other channel of the row.
  const int64_t row_group =
      layout.quant_group > 0
          ? layout.quant_group
          : std::gcd(layout.head_dim, layout.v_head_dim > 0 ? layout.v_head_dim : layout.head_dim);
  return std::gcd(row_group, cache::kMaxKvQuantGroup);
}

cache::KvCacheSpec kv_cache_spec(const CausalLM& model, int64_t block_size, int64_t num_blocks,
                                 DType dtype, bool huge_pages) {
  const KvLayout layout = model.kv_layout();
  cache::KvCacheSpec spec;
  spec.num_layers = layout.num_layers;
  spec.kv_heads = layout.kv_heads;
  spec.head_dim = layout.head_dim;
  spec.v_head_dim = layout.v_head_dim;
  spec.block_size = block_size;
  spec.num_blocks = num_blocks;
  spec.dtype = dtype;
  spec.quant_group = kv_quant_group(layout);
  spec.huge_pages = huge_pages;
  spec.index_dim = layout.index_dim;
  spec.index_layers = layout.index_layers;
  return spec;
}

}  // namespace deepinfer::model
