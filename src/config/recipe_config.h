#pragma once
// Recipe configs (docs/CONFIG.md): the articles' JSON trio (infer_config.json, plus
// ep_config.json and model_config.json read from beside it) and the public repository's YAML,
// parsed into one typed RecipeConfig. Every key is either honoured (mapped onto a field here)
// or rejected with a ConfigError naming the file and key; nothing is ignored.
//
//   RecipeConfig config = load_recipe("configs/qwen/infer_config.json");
//   apply_overrides(config, {{"block_size", 32}}, "--block-size");   // CLI / Python win
//   // ... after io::ModelConfig::load(model dir):
//   check_checkpoint(config, model_config);
//   engine::EngineConfig ec = engine_config(config, generation);
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace deepinfer::config {

// A config file or override that cannot be honoured: the message names the key, the file
// (or flag) and what to do. A bad argument, as opposed to a failure while running.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// One value and where it was set ("configs/x/infer_config.json: kv_cache.block_size", or
// "--block-size"), so later errors can point at it.
template <typename T>
struct Setting {
  std::optional<T> value;
  std::string origin;

  bool has() const { return value.has_value(); }
  const T& operator*() const { return *value; }
  const T* operator->() const { return &*value; }
  T value_or(T fallback) const { return value ? *value : fallback; }
};

// An architecture value the config expects the checkpoint's config.json to hold.
struct ExpectedValue {
  std::string key;       // config.json key, e.g. "hidden_size" or "n_routed_experts"
  nlohmann::json value;  // number or string
  std::string origin;
};

struct RecipeConfig {
  std::string source;  // the main config file ("" when built from overrides only)

  // Model and weights.
  Setting<std::string> model_path;
  Setting<std::string> model_name;  // served model name (YAML model_config.model_name)
  std::vector<ExpectedValue> expected;
  Setting<std::string> dtype;  // weight dtype: auto | f32 | bf16 | f16 (atb.precision_mode)
  // Block type projections are quantized to at load: none | q8_0 | q4_0 | q4_1 (canonical
  // names; int8 is stored as q8_0). docs/QUANTIZATION.md.
  Setting<std::string> quantization;
  // With quantization: the lm_head (and a tied embedding) quantized too, to q6_k / q8_0.
  Setting<bool> quantize_lm_head;
  // Activations of matmuls with bf16 weights: f32 (exact) | bf16 (rounded, vdpbf16ps).
  Setting<std::string> matmul_precision;
  Setting<bool> attention_fusion;
  Setting<bool> moe_fusion;
  // Another directory's tokenizer.json / tokenizer_config.json (vLLM's --tokenizer).
  Setting<std::string> tokenizer_path;
  // A Jinja file used instead of the tokenizer's chat template (vLLM's --chat-template).
  Setting<std::string> chat_template;

  // Parallel layout (parallel/parallel_context.h): checked against mpirun's world and the
  // checkpoint by config::load_model_setup. The YAML's attn_tp_size / moe_tp_size give the
  // tensor and expert sizes as world_size / (attention DP) and world_size / moe_tp_size.
  Setting<int64_t> world_size;
  Setting<int64_t> tensor_parallel_size;
  Setting<int64_t> pipeline_parallel_size;
  Setting<int64_t> expert_parallel_size;
  Setting<int64_t> data_parallel_size;    // attention data parallelism (DP attention)
  Setting<int64_t> num_micro_batches;     // pipeline micro-batches per step
  Setting<int64_t> attn_tp_size;          // YAML parallel_config
  Setting<int64_t> moe_tp_size;           // YAML parallel_config
  Setting<std::vector<int64_t>> devices;  // --npu_devices: their count sets the threads
  Setting<int64_t> threads;
  // Memory and CPU placement (core/memory.h, core/cpu_placement.h): llama.cpp's --mlock,
  // --no-mmap (mmap = false), --numa, --cpu-mask, --cpu-strict; transparent huge pages.
  Setting<bool> mlock;
  Setting<bool> mmap;
  Setting<bool> transparent_huge_pages;
  Setting<std::string> numa;      // distribute | isolate | numactl
  Setting<std::string> cpu_mask;  // hex, bit i = CPU i
  Setting<bool> cpu_strict;

  // KV cache.
  Setting<int64_t> block_size;
  Setting<int64_t> max_num_blocks;
  Setting<double> kv_cache_memory_gib;
  Setting<double> mem_fraction_static;  // weights + KV cache within this share of RAM
  Setting<std::string> kv_cache_dtype;  // auto | f32 | bf16 | f16 | int8
  // MoE exchange and expert load balancing (parallel/moe_options.h).
  Setting<std::string> communication_dtype;  // fp32 | bf16 | fp16: rows of the all-to-alls
  Setting<double> capacity_factor;
  Setting<bool> enable_eplb;
  Setting<int64_t> num_redundant_experts;
  Setting<int64_t> eplb_window;
  Setting<int64_t> eplb_interval;
  Setting<std::string> eplb_load_file;
  Setting<std::string> eplb_record;

  // Scheduler.
  Setting<int64_t> max_num_seqs;
  Setting<int64_t> max_model_len;
  // max_model_len may exceed what the checkpoint was trained for (max_position_embeddings,
  // scaled by its rope scaling): vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
  Setting<bool> allow_long_max_model_len;
  Setting<int64_t> max_num_batched_tokens;
  Setting<int64_t> max_prompt_len;  // YAML data_config.input_truncated_len
  Setting<bool> enable_prefix_caching;
  Setting<std::string> scheduling_policy;

  // Default sampling of requests that do not say otherwise.
  Setting<bool> do_sample;
  Setting<double> temperature;
  Setting<double> top_p;
  Setting<int64_t> top_k;
  Setting<double> repetition_penalty;
  Setting<int64_t> max_new_tokens;
  Setting<uint64_t> seed;
};

// Loads a config by its extension: .yaml / .yml is the public repository's layout, anything
// else the articles' infer_config.json; for the latter, ep_config.json and model_config.json
// in the same directory are merged when present. A key set in two files with different
// values is an error naming both. Throws ConfigError.
RecipeConfig load_recipe(const std::string& path);

// The parsers behind load_recipe, on text in memory; `source` names the file in errors.
void parse_infer_config(RecipeConfig& config, const nlohmann::json& json,
                        const std::string& source);
void parse_ep_config(RecipeConfig& config, const nlohmann::json& json, const std::string& source);
void parse_model_config(RecipeConfig& config, const nlohmann::json& json,
                        const std::string& source);
void parse_yaml_recipe(RecipeConfig& config, const std::string& text, const std::string& source);

// Flat overrides (CLI flags, Python keyword arguments) that win over the files: keys are the
// config keys (model_path, block_size, max_batch_size, temperature, ...) or the engine flag
// names with underscores (max_num_seqs, max_model_len, dtype, threads, ...); see
// override_keys(). Errors name "<origin>: <key>". A null value leaves the key unset.
void apply_overrides(RecipeConfig& config, const nlohmann::json& overrides,
                     const std::string& origin);
// One override. `origin` names it in errors as it is ("--top-p"). With `from_text` a string
// value is parsed as the key's type (command-line flags arrive as text).
void apply_override(RecipeConfig& config, const std::string& key, const nlohmann::json& value,
                    const std::string& origin, bool from_text = false);
const std::vector<std::string>& override_keys();

}  // namespace deepinfer::config
