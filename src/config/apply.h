#pragma once
// From a RecipeConfig to what the model loader, the engine and requests take.
#include <cstdint>
#include <string>

#include "config/recipe_config.h"
#include "core/cpu_placement.h"
#include "core/memory.h"
#include "engine/engine.h"
#include "engine/sampling_params.h"
#include "io/hf_config.h"
#include "model/weights.h"

namespace deepinfer::config {

// Default max_new_tokens of a request when neither the config nor generation_config.json
// says (the articles' example asks for 512).
inline constexpr int64_t kDefaultMaxNewTokens = 512;

// model_path resolved: as given when absolute or present relative to the working directory,
// else relative to the config file's directory. Throws ConfigError when unset or missing.
std::string resolve_model_path(const RecipeConfig& config);

// Compares every architecture value the config states (model.* of infer_config.json,
// num_experts / top_k of ep_config.json) with the checkpoint's config.json; throws
// ConfigError naming the key, both values and both files.
void check_checkpoint(const RecipeConfig& config, const io::ModelConfig& model,
                      const std::string& model_dir);

// Routed experts of a checkpoint (n_routed_experts | num_experts | num_local_experts; 0 for a
// dense model) and how many each token uses.
int64_t routed_experts(const io::ModelConfig& model);
int64_t experts_per_token(const io::ModelConfig& model);

model::LoadOptions load_options(const RecipeConfig& config);
// The MoE part of it: communication dtype, capacity factor, expert load balancing.
parallel::MoeOptions moe_options(const RecipeConfig& config);
// Compute threads: `threads`, else the number of devices listed, else 0 (all cores).
int64_t thread_count(const RecipeConfig& config);
// mmap / mlock / transparent_huge_pages as the loader and the KV pool take them.
MemoryOptions memory_options(const RecipeConfig& config);
// Where `threads` compute threads run: numa, or cpu_mask / cpu_strict (ConfigError for both).
CpuPlacement cpu_placement(const RecipeConfig& config, int threads);

// The longest context a checkpoint was trained for, as vLLM derives it: max_position_embeddings,
// times the rope scaling factor for linear / dynamic scaling, or original_max_position_embeddings
// times the factor for yarn (llama3 and longrope already count in max_position_embeddings).
// 0 when config.json does not say.
int64_t derived_max_model_len(const io::ModelConfig& model);

// Refuses a max_model_len (the config's, or input_truncated_len + max_new_tokens) beyond
// derived_max_model_len unless allow_long_max_model_len is set, as vLLM does: ConfigError
// naming both numbers.
void check_max_model_len(const RecipeConfig& config, const engine::EngineConfig& engine,
                         const io::ModelConfig& model, const std::string& model_dir);

// True when config.json marks a random-weight test checkpoint ("deepinfer_test_model": true,
// written by tools/make_tiny_models.py): its output is not meaningful text.
bool is_test_model(const io::ModelConfig& model);

// Block size, pool size, scheduler budgets, prefix caching, policy; eos ids from
// generation_config.json. max_model_len defaults to max_prompt_len + max_new_tokens when the
// YAML's input_truncated_len is given. mem_fraction_static needs the loaded model: see
// runtime.h.
engine::EngineConfig engine_config(const RecipeConfig& config,
                                   const io::GenerationConfig& generation);

// Request defaults: generation_config.json first (greedy unless it says do_sample), then the
// config's inference / data_config keys. Throws ConfigError when do_sample is false but a
// sampling key asks for sampling.
engine::SamplingParams sampling_defaults(const RecipeConfig& config,
                                         const io::GenerationConfig& generation);

}  // namespace deepinfer::config
