#include "config/apply.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cache/kv_cache.h"
#include "core/dtype.h"
#include "io/gguf_model.h"
#include "model/weight_quantization.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;

std::optional<int64_t> raw_int(const io::ModelConfig& model, const char* key) {
  const auto it = model.raw.find(key);
  if (it == model.raw.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// The checkpoint's value of an architecture key, as the loader resolved it where it applies
// defaults (num_key_value_heads, rope_theta of transformers 5's rope_parameters).
nlohmann::json checkpoint_value(const io::ModelConfig& model, const std::string& key) {
  if (key == "model_type") return model.model_type;
  if (key == "vocab_size") return model.vocab_size;
  if (key == "hidden_size") return model.hidden_size;
  if (key == "intermediate_size") return model.intermediate_size;
  if (key == "num_hidden_layers") return model.num_hidden_layers;
  if (key == "num_attention_heads") return model.num_attention_heads;
  if (key == "num_key_value_heads") return model.num_key_value_heads;
  if (key == "max_position_embeddings") return model.max_position_embeddings;
  if (key == "rope_theta") return model.rope_theta;
  if (key == "num_experts") return routed_experts(model);
  if (key == "num_experts_per_tok") return experts_per_token(model);
  return nullptr;
}

bool same(const nlohmann::json& expected, const nlohmann::json& actual) {
  if (expected.is_number() && actual.is_number()) {
    const double a = expected.get<double>();
    const double b = actual.get<double>();
    return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
  }
  return expected == actual;
}

}  // namespace

std::string resolve_model_path(const RecipeConfig& config) {
  if (!config.model_path.has()) {
    throw ConfigError(str_cat(config.source.empty() ? "no config" : config.source,
                              ": no model: set model.model_path (JSON) or "
                              "model_config.model_path (YAML), or pass --model DIR"));
  }
  const fs::path given(*config.model_path);
  if (given.is_absolute() || fs::exists(given) || config.source.empty()) {
    if (!fs::is_directory(given) && !io::gguf_model_file(given.string())) {
      throw ConfigError(str_cat(config.model_path.origin, " = \"", given.string(),
                                "\": not a checkpoint directory or .gguf file"));
    }
    return given.string();
  }
  const fs::path beside = fs::path(config.source).parent_path() / given;
  if (!fs::is_directory(beside) && !io::gguf_model_file(beside.string())) {
    throw ConfigError(str_cat(config.model_path.origin, " = \"", given.string(),
                              "\": no such directory (looked in the working directory and in ",
                              fs::path(config.source).parent_path().string(),
                              "); point it at a checkpoint directory or pass --model DIR"));
  }
  return beside.lexically_normal().string();
}

int64_t routed_experts(const io::ModelConfig& model) {
  for (const char* key : {"n_routed_experts", "num_experts", "num_local_experts"}) {
    if (const auto v = raw_int(model, key)) return *v;
  }
  return 0;
}

int64_t experts_per_token(const io::ModelConfig& model) {
  if (routed_experts(model) == 0) return 0;
  return raw_int(model, "num_experts_per_tok").value_or(0);
}

void check_checkpoint(const RecipeConfig& config, const io::ModelConfig& model,
                      const std::string& model_dir) {
  for (const ExpectedValue& expected : config.expected) {
    const nlohmann::json actual = checkpoint_value(model, expected.key);
    if (expected.key == "num_experts" && actual == 0) {
      throw ConfigError(str_cat(expected.origin, " = ", expected.value.dump(), " but ", model_dir,
                                "/config.json describes a dense model (no routed experts); "
                                "remove ep_config.json or point model_path at an MoE checkpoint"));
    }
    if (!same(expected.value, actual)) {
      throw ConfigError(str_cat(expected.origin, " = ", expected.value.dump(), " but ", model_dir,
                                "/config.json has ", expected.key, " = ", actual.dump(),
                                ": the config describes another model; fix the value (or remove "
                                "it) or point model_path at the matching checkpoint"));
    }
  }
}

parallel::MoeOptions moe_options(const RecipeConfig& config) {
  parallel::MoeOptions moe;
  if (config.communication_dtype.has()) {
    moe.communication_dtype = parallel::parse_communication_dtype(
        *config.communication_dtype, config.communication_dtype.origin);
  }
  if (config.capacity_factor.has()) moe.capacity_factor = *config.capacity_factor;
  moe.fused_experts = config.moe_fusion.value_or(true);
  parallel::EplbOptions& eplb = moe.eplb;
  eplb.enabled = config.enable_eplb.value_or(false);
  eplb.num_redundant_experts = config.num_redundant_experts.value_or(0);
  eplb.window = config.eplb_window.value_or(parallel::EplbOptions::kDefaultWindow);
  // --enable-eplb without an interval re-balances every 3000 forward calls (vLLM's default).
  eplb.interval = config.eplb_interval.value_or(eplb.enabled ? 3000 : 0);
  eplb.load_file = config.eplb_load_file.value_or("");
  eplb.record_file = config.eplb_record.value_or("");
  if (!eplb.load_file.empty() && !std::filesystem::is_regular_file(eplb.load_file)) {
    throw ConfigError(str_cat(config.eplb_load_file.origin, " = \"", eplb.load_file,
                              "\": no such file (an expert load record written by --eplb-record)"));
  }
  return moe;
}

MemoryOptions memory_options(const RecipeConfig& config) {
  MemoryOptions memory;
  memory.mmap = config.mmap.value_or(true);
  memory.mlock = config.mlock.value_or(false);
  memory.huge_pages = config.transparent_huge_pages.value_or(true);
  return memory;
}

CpuPlacement cpu_placement(const RecipeConfig& config, int threads) {
  const NumaStrategy numa = config.numa.has()
                                ? parse_numa_strategy(*config.numa, config.numa.origin)
                                : NumaStrategy::none;
  const std::vector<int> mask = config.cpu_mask.has()
                                    ? parse_cpu_mask(*config.cpu_mask, config.cpu_mask.origin)
                                    : std::vector<int>{};
  const bool strict = config.cpu_strict.value_or(false);
  if (numa != NumaStrategy::none && (config.cpu_mask.has() || strict)) {
    throw ConfigError(
        str_cat(config.numa.origin, " = ", *config.numa, " and ",
                config.cpu_mask.has() ? config.cpu_mask.origin : config.cpu_strict.origin,
                " both place the compute threads; give one of them"));
  }
  return plan_cpu_placement(threads, numa, mask, strict);
}

model::LoadOptions load_options(const RecipeConfig& config) {
  model::LoadOptions options;
  if (config.dtype.has() && *config.dtype != "auto")
    options.weight_dtype = parse_dtype(*config.dtype);
  if (config.quantization.has())
    options.quantization = model::parse_quantization(*config.quantization);
  if (config.quantize_lm_head.value_or(false)) {
    if (!options.quantization) {
      throw ConfigError(str_cat(config.quantize_lm_head.origin,
                                " needs quantization (--quantization q8_0|q4_0|...|q4_k_m): the "
                                "lm_head is quantized with the projections"));
    }
    try {
      options.quantization = model::with_lm_head(*options.quantization);
    } catch (const Error& e) {
      throw ConfigError(str_cat(config.quantize_lm_head.origin, ": ", e.what()));
    }
  }
  options.num_micro_batches = config.num_micro_batches.value_or(1);
  options.moe = moe_options(config);
  options.memory = memory_options(config);
  options.fused_attention = config.attention_fusion.value_or(true);
  return options;
}

int64_t thread_count(const RecipeConfig& config) {
  if (config.threads.has()) return *config.threads;
  if (config.devices.has()) return static_cast<int64_t>(config.devices->size());
  return 0;
}

int64_t derived_max_model_len(const io::ModelConfig& model) {
  const int64_t base = model.max_position_embeddings;
  if (base <= 0) return 0;
  const io::RopeScaling& rope = model.rope_scaling;
  if (rope.factor <= 1.0) return base;
  if (rope.type == "linear" || rope.type == "dynamic") {
    return static_cast<int64_t>(static_cast<double>(base) * rope.factor);
  }
  if (rope.type == "yarn") {
    const int64_t original =
        rope.original_max_position_embeddings > 0 ? rope.original_max_position_embeddings : base;
    return std::max(base, static_cast<int64_t>(static_cast<double>(original) * rope.factor));
  }
  return base;
}

void check_max_model_len(const RecipeConfig& config, const engine::EngineConfig& engine,
                         const io::ModelConfig& model, const std::string& model_dir) {
  const int64_t derived = derived_max_model_len(model);
  if (engine.max_model_len <= derived || derived <= 0 ||
      config.allow_long_max_model_len.value_or(false)) {
    return;
  }
  const std::string origin =
      config.max_model_len.has()
          ? config.max_model_len.origin
          : str_cat(config.max_prompt_len.origin, " + max_new_tokens (max_model_len)");
  const bool scaled = derived != model.max_position_embeddings;
  throw ConfigError(str_cat(
      origin, " = ", engine.max_model_len, " is greater than the derived max_model_len ", derived,
      " (", scaled ? "rope scaling of " : "",
      "max_position_embeddings = ", model.max_position_embeddings, " in ", model_dir,
      "/config.json): positions beyond it were never trained and give wrong output; lower it, "
      "or pass --allow-long-max-model-len (key allow_long_max_model_len) to use it anyway"));
}

bool is_test_model(const io::ModelConfig& model) {
  const auto it = model.raw.find("deepinfer_test_model");
  return it != model.raw.end() && it->is_boolean() && it->get<bool>();
}

engine::EngineConfig engine_config(const RecipeConfig& config,
                                   const io::GenerationConfig& generation) {
  engine::EngineConfig out;
  out.block_size = config.block_size.value_or(out.block_size);
  out.max_num_blocks = config.max_num_blocks.value_or(0);
  out.kv_cache_memory_gib = config.kv_cache_memory_gib.value_or(0);
  if (config.max_num_blocks.has() && config.kv_cache_memory_gib.has()) {
    throw ConfigError(str_cat("conflicting values: ", config.max_num_blocks.origin, " and ",
                              config.kv_cache_memory_gib.origin,
                              " both size the KV pool; give one of them"));
  }
  if (config.mem_fraction_static.has() &&
      (config.max_num_blocks.has() || config.kv_cache_memory_gib.has())) {
    throw ConfigError(str_cat("conflicting values: ", config.mem_fraction_static.origin,
                              " sizes the KV pool, and so does ",
                              config.max_num_blocks.has() ? config.max_num_blocks.origin
                                                          : config.kv_cache_memory_gib.origin,
                              "; give one of them"));
  }
  out.kv_cache_dtype = cache::parse_kv_cache_dtype(config.kv_cache_dtype.value_or("auto"));
  out.max_num_seqs = config.max_num_seqs.value_or(out.max_num_seqs);
  out.max_num_batched_tokens = config.max_num_batched_tokens.value_or(out.max_num_batched_tokens);
  out.max_model_len = config.max_model_len.value_or(0);
  if (!config.max_model_len.has() && config.max_prompt_len.has()) {
    const int64_t new_tokens =
        config.max_new_tokens.value_or(generation.max_new_tokens.value_or(kDefaultMaxNewTokens));
    out.max_model_len = *config.max_prompt_len + new_tokens;
  }
  if (config.max_prompt_len.has() && config.max_model_len.has() &&
      *config.max_prompt_len >= *config.max_model_len) {
    throw ConfigError(str_cat(config.max_prompt_len.origin, " = ", *config.max_prompt_len,
                              " leaves no room to generate within ", config.max_model_len.origin,
                              " = ", *config.max_model_len));
  }
  out.enable_prefix_caching = config.enable_prefix_caching.value_or(false);
  out.scheduling_policy =
      engine::parse_scheduling_policy(config.scheduling_policy.value_or("fifo"));
  out.eos_token_ids = generation.eos_token_ids;
  if (config.seed.has()) out.seed = *config.seed;
  out.kv_huge_pages = config.transparent_huge_pages.value_or(true);
  return out;
}

engine::SamplingParams sampling_defaults(const RecipeConfig& config,
                                         const io::GenerationConfig& generation) {
  engine::SamplingParams p;
  p.temperature = 0;  // greedy unless something asks for sampling
  if (generation.do_sample) {
    p.temperature = generation.temperature.value_or(1.0);
    p.top_p = generation.top_p.value_or(1.0);
    p.top_k = generation.top_k.value_or(0);
  }
  p.repetition_penalty = generation.repetition_penalty.value_or(1.0);
  p.max_new_tokens = generation.max_new_tokens.value_or(kDefaultMaxNewTokens);

  if (config.do_sample.has() && !*config.do_sample) {
    // Greedy: a key that only means something when sampling is a mistake, not a default.
    const auto refuse = [&](const std::string& origin, const std::string& shown) {
      throw ConfigError(str_cat(origin, " = ", shown, " has no effect because ",
                                config.do_sample.origin,
                                " = false (greedy decoding); remove it or set do_sample to true"));
    };
    if (config.temperature.has() && *config.temperature > 0) {
      refuse(config.temperature.origin, nlohmann::json(*config.temperature).dump());
    }
    if (config.top_p.has() && *config.top_p < 1) {
      refuse(config.top_p.origin, nlohmann::json(*config.top_p).dump());
    }
    if (config.top_k.has() && *config.top_k > 0) {
      refuse(config.top_k.origin, nlohmann::json(*config.top_k).dump());
    }
    p.temperature = 0;
    p.top_p = 1;
    p.top_k = 0;
  } else {
    if (config.do_sample.has() && *config.do_sample) {
      p.temperature = config.temperature.value_or(generation.temperature.value_or(1.0));
      if (p.temperature <= 0) {
        throw ConfigError(str_cat(config.temperature.has() ? config.temperature.origin
                                                           : "generation_config.json: temperature",
                                  " = 0 means greedy decoding but ", config.do_sample.origin,
                                  " = true asks for sampling; use a temperature > 0 or set "
                                  "do_sample to false"));
      }
    } else if (config.temperature.has()) {
      p.temperature = *config.temperature;
    }
    if (config.top_p.has()) p.top_p = *config.top_p;
    if (config.top_k.has()) p.top_k = *config.top_k;
  }
  if (config.repetition_penalty.has()) p.repetition_penalty = *config.repetition_penalty;
  if (config.max_new_tokens.has()) p.max_new_tokens = *config.max_new_tokens;
  if (config.seed.has()) p.seed = *config.seed;
  return p;
}

}  // namespace deepinfer::config
