#pragma once
// Flags shared by the commands that load a model (--model, --threads, --dtype, --log-level),
// and how flags become settings: every flag that is a setting is applied as the recipe
// override of the same name with underscores (`--block-size 32` -> block_size = "32"), so
// src/config checks and explains it exactly as a recipe file's key, and every command loads
// through the one set-up path (config/setup.h, config/runtime.h).
#include <map>
#include <set>
#include <string>

#include "cli/args.h"
#include "config/recipe_config.h"
#include "model/causal_lm.h"

namespace deepinfer::cli {

// Adds the shared value flags (--model, --threads, --dtype, --log-level, and --numa,
// --cpu-mask, --cpu-strict, --transparent-huge-pages, --enable-atb-attention) to a command's
// set; with_model_bool_flags adds --mlock and --no-mmap (as mlock = true / mmap = false) and
// --quantize-lm-head (quantize_lm_head = true).
// Usage text of the memory, thread and fusion flags in kModelFlagsUsage.
std::set<std::string> with_model_flags(std::set<std::string> value_flags);
std::set<std::string> with_model_bool_flags(std::set<std::string> bool_flags);
extern const char* const kModelFlagsUsage;
// --mlock and --no-mmap as the settings mlock / mmap (recipe_from_flags does this).
void apply_memory_flags(config::RecipeConfig& config, const Args& args);
// `flag` (--quantize-lm-head; validate's reference model has its own) as quantize_lm_head.
void apply_quantize_lm_head_flag(config::RecipeConfig& config, const Args& args,
                                 const std::string& flag = "quantize-lm-head");
// The value flags of with_model_flags but --log-level, apply_memory_flags and
// apply_quantize_lm_head_flag: for commands
// that read a recipe first and apply their flags over it (run, bench).
void apply_model_flags(config::RecipeConfig& config, const Args& args);

// The parallel-layout flags of the commands that run distributed (generate, bench):
// --expert-parallel-size, --tensor-parallel-size, --pipeline-parallel-size,
// --data-parallel-size and the booleans --enable-expert-parallel (vLLM: expert parallelism
// over every rank of a pipeline stage) and --enable-dp-attention (SGLang: attention data
// parallelism over the stage's tensor-parallel groups). Usage text in kParallelFlagsUsage.
extern const char* const kParallelFlagsUsage;
std::set<std::string> with_parallel_value_flags(std::set<std::string> value_flags);
std::set<std::string> with_parallel_bool_flags(std::set<std::string> bool_flags);
// vLLM's short spellings -tp, -pp, -dp added to a command's aliases.
std::map<std::string, std::string> with_parallel_aliases(
    std::map<std::string, std::string> aliases);
// Applies them as the settings expert_parallel_size / tensor_parallel_size /
// pipeline_parallel_size (recipe_from_flags does this).
void apply_parallel_flags(config::RecipeConfig& config, const Args& args);

// Applies each flag of `flags` that `args` holds to `config` as an override named "--flag"
// in errors; a boolean flag is true.
void apply_setting_flags(config::RecipeConfig& config, const Args& args,
                         const std::set<std::string>& flags);

// The engine flags of engine_flags.h, --no-enable-prefix-caching included (as
// enable_prefix_caching = false; giving both spellings is an error).
void apply_engine_flags(config::RecipeConfig& config, const Args& args);

// A config from --model / --threads / --dtype and, with `engine_flags`, the engine flags of
// engine_flags.h (block size, KV pool and dtype, scheduler budgets, prefix caching, policy).
config::RecipeConfig recipe_from_flags(const Args& args, bool engine_flags);

// --dtype alone, for commands that load weights without the set-up path (info).
model::LoadOptions load_options_from(const Args& args);

}  // namespace deepinfer::cli
