#include "config/recipe_keys.h"

#include <algorithm>
#include <set>

#include "cache/kv_cache.h"
#include "core/cpu_placement.h"
#include "core/dtype.h"
#include "model/weight_quantization.h"

namespace deepinfer::config {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string show(const std::string& v) {
  return nlohmann::json(v).dump();
}
template <typename T>
std::string show(const T& v) {
  return nlohmann::json(v).dump();
}

template <typename T>
void assign(Setting<T>& setting, T value, const Value& from, Mode mode) {
  if (mode == Mode::merge && setting.has() && *setting != value) {
    throw ConfigError(str_cat("conflicting values: ", setting.origin, " = ", show(*setting),
                              " but ", from.origin(), " = ", show(value),
                              "; give one value (or remove one of the keys)"));
  }
  setting.value = std::move(value);
  setting.origin = from.origin();
}

// A switch this build supports only in one position (e.g. fused attention on).
bool require_bool(const Value& v, bool supported, const char* why) {
  const bool value = v.boolean();
  if (value != supported) v.reject(why);
  return value;
}

}  // namespace

namespace set {

void model_path(RecipeConfig& c, const Value& v, Mode m) {
  std::string path = v.string();
  if (path.empty()) v.reject("must name the checkpoint directory");
  assign(c.model_path, std::move(path), v, m);
}

void model_name(RecipeConfig& c, const Value& v, Mode m) {
  std::string name = v.string();
  if (name.empty()) v.reject("must not be empty");
  assign(c.model_name, std::move(name), v, m);
}

void matmul_precision(RecipeConfig& c, const Value& v, Mode m) {
  const std::string name = lower(v.string());
  if (name != "f32" && name != "bf16") {
    v.reject(
        "expected f32 (bf16 weights widened exactly) or bf16 (activations rounded to "
        "bf16, as llama.cpp and PyTorch bf16 do)");
  }
  assign(c.matmul_precision, name, v, m);
}

void precision_mode(RecipeConfig& c, const Value& v, Mode m) {
  const std::string mode = lower(v.string());
  std::string dtype;
  if (mode == "fp16" || mode == "f16" || mode == "float16") dtype = "f16";
  if (mode == "bf16" || mode == "bfloat16") dtype = "bf16";
  if (mode == "fp32" || mode == "f32" || mode == "float32") dtype = "f32";
  if (mode == "auto") dtype = "auto";
  if (dtype.empty()) {
    v.reject(
        "expected fp16, bf16, fp32 or auto (weights as stored); for block-quantized weights "
        "use the key quantization (--quantization): ",
        model::quantization_choices());
  }
  assign(c.dtype, dtype, v, m);
}

void quantization(RecipeConfig& c, const Value& v, Mode m) {
  const std::string name = lower(v.string());
  if (const std::string problem = model::quantization_problem(name); !problem.empty())
    v.reject(problem);
  // Canonical, so "int8" in one file agrees with "q8_0" in another.
  const std::optional<model::Quantization> choice = model::parse_quantization(name);
  assign(c.quantization, choice ? choice->name() : std::string("none"), v, m);
}

void quantize_lm_head(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.quantize_lm_head, v.boolean(), v, m);
}

// false: the unfused kernels for A/B runs (model::LoadOptions::fused_attention).
void atb_attention(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.attention_fusion, v.boolean(), v, m);
}

void atb_moe(RecipeConfig& c, const Value& v, Mode m) {
  // false: the unfused per-expert path (gate_up, silu_mul, down per expert), for A/B runs.
  assign(c.moe_fusion, v.boolean(), v, m);
}

// Any positive size: config::load_model_setup checks the sizes against each other, mpirun's
// world and the checkpoint (docs/DISTRIBUTED.md).
void tensor_parallel_size(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.tensor_parallel_size, v.positive(), v, m);
}

void pipeline_parallel_size(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.pipeline_parallel_size, v.positive(), v, m);
}

void expert_parallel_size(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.expert_parallel_size, v.positive(), v, m);
}

void data_parallel_size(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.data_parallel_size, v.positive(), v, m);
}

void num_micro_batches(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.num_micro_batches, v.positive(), v, m);
}

void attn_tp_size(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.attn_tp_size, v.positive(), v, m);
}

void moe_tp_size(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.moe_tp_size, v.positive(), v, m);
}

void world_size(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.world_size, v.positive(), v, m);
}

void yaml_tp_size(RecipeConfig&, const Value& v, Mode) {
  // embed / lmhead / dense / o_proj / cp: deepinfer splits embeddings, lm_head, dense layers
  // and o_proj over the attention tensor-parallel group and has no context parallelism, so
  // only a size that changes nothing is taken.
  if (v.positive() != 1)
    v.reject(
        "a separate split for this part is not built: deepinfer splits embeddings, "
        "lm_head, dense layers and o_proj over attn_tp_size's group; set it to 1");
}

void devices(RecipeConfig& c, const Value& v, Mode m) {
  auto ids = v.int_list();
  if (ids.empty()) v.reject("give at least one device id");
  std::set<int64_t> seen;
  for (int64_t id : ids) {
    if (id < 0) v.reject("device ids must be non-negative");
    if (!seen.insert(id).second) v.reject("device ", id, " is listed twice");
  }
  if (ids.size() > 4096) v.reject("at most 4096 devices");
  assign(c.devices, std::move(ids), v, m);
}

void threads(RecipeConfig& c, const Value& v, Mode m) {
  const int64_t n = v.integer();
  if (n < 0 || n > 4096) v.reject("expected 0 (all cores) to 4096 threads");
  assign(c.threads, n, v, m);
}

void mlock(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.mlock, v.boolean(), v, m);
}

void mmap(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.mmap, v.boolean(), v, m);
}

void transparent_huge_pages(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.transparent_huge_pages, v.boolean(), v, m);
}

void numa(RecipeConfig& c, const Value& v, Mode m) {
  const std::string name = v.string();
  try {  // a bad name is refused where it was given
    parse_numa_strategy(name, v.origin());
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  assign(c.numa, name, v, m);
}

void cpu_mask(RecipeConfig& c, const Value& v, Mode m) {
  const std::string mask = v.string();
  try {
    parse_cpu_mask(mask, v.origin());
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  assign(c.cpu_mask, mask, v, m);
}

void cpu_strict(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.cpu_strict, v.boolean(), v, m);
}

void use_paged_attention(RecipeConfig&, const Value& v, Mode) {
  require_bool(v, true,
               "the KV cache is always paged in deepinfer (blocks, block tables, prefix "
               "sharing); a contiguous cache is not built: remove the key or set it to true");
}

void block_size(RecipeConfig& c, const Value& v, Mode m) {
  const int64_t n = v.positive();
  if (n > 1024) v.reject("must be in [1, 1024] tokens");
  assign(c.block_size, n, v, m);
}

void max_num_blocks(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.max_num_blocks, v.positive(), v, m);
}

void kv_cache_memory(RecipeConfig& c, const Value& v, Mode m) {
  const double gib = v.number();
  if (gib <= 0) v.reject("must be a positive number of GiB");
  assign(c.kv_cache_memory_gib, gib, v, m);
}

void mem_fraction_static(RecipeConfig& c, const Value& v, Mode m) {
  const double f = v.number();
  if (f <= 0 || f > 1) v.reject("must be in (0, 1]: the share of RAM for weights + KV cache");
  assign(c.mem_fraction_static, f, v, m);
}

void kv_cache_dtype(RecipeConfig& c, const Value& v, Mode m) {
  const std::string name = lower(v.string());
  if (name == "int4" || name == "i4" || name.starts_with("fp8") || name.starts_with("float8")) {
    v.reject("4-bit and fp8 KV caches are not built; use auto (f32), bf16, f16 or int8");
  }
  DType dtype = DType::f32;
  try {
    dtype = cache::parse_kv_cache_dtype(name);
  } catch (const Error&) {
    v.reject("expected auto, f32 (fp32), bf16, f16 (fp16) or int8");
  }
  // Stored by its canonical name so "fp32" in one file agrees with "float32" in another;
  // "auto" stays apart: it yields to enable_kv_cache_quant.
  std::string canonical = name == "auto" ? "auto" : std::string(dtype_name(dtype));
  if (dtype == DType::i8) canonical = "int8";
  assign(c.kv_cache_dtype, std::move(canonical), v, m);
}

void enable_kv_cache_quant(RecipeConfig& c, const Value& v, Mode m) {
  if (!v.boolean()) return;  // false: no quantization asked for; kv_cache_dtype decides.
  if (c.kv_cache_dtype.has() && *c.kv_cache_dtype != "auto" && *c.kv_cache_dtype != "int8") {
    throw ConfigError(str_cat("conflicting values: ", v.origin(),
                              " = true asks for an int8 KV cache but ", c.kv_cache_dtype.origin,
                              " = ", show(*c.kv_cache_dtype),
                              "; remove one of them (or set kv_cache_dtype to \"int8\")"));
  }
  // An "auto" or "int8" dtype given beside it is replaced: both say int8.
  c.kv_cache_dtype.value.reset();
  assign(c.kv_cache_dtype, std::string("int8"), v, m);
}

void max_num_seqs(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.max_num_seqs, v.positive(), v, m);
}
void max_model_len(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.max_model_len, v.positive(), v, m);
}
void allow_long_max_model_len(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.allow_long_max_model_len, v.boolean(), v, m);
}
void tokenizer_path(RecipeConfig& c, const Value& v, Mode m) {
  std::string path = v.string();
  if (path.empty()) v.reject("must name a directory with tokenizer.json");
  assign(c.tokenizer_path, std::move(path), v, m);
}
void chat_template(RecipeConfig& c, const Value& v, Mode m) {
  std::string path = v.string();
  if (path.empty()) v.reject("must name a Jinja chat template file");
  assign(c.chat_template, std::move(path), v, m);
}
void max_num_batched_tokens(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.max_num_batched_tokens, v.positive(), v, m);
}
void max_prompt_len(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.max_prompt_len, v.positive(), v, m);
}
void enable_prefix_caching(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.enable_prefix_caching, v.boolean(), v, m);
}

void scheduling_policy(RecipeConfig& c, const Value& v, Mode m) {
  const std::string policy = lower(v.string());
  if (policy != "fifo" && policy != "priority") v.reject("expected fifo or priority");
  assign(c.scheduling_policy, policy, v, m);
}

void do_sample(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.do_sample, v.boolean(), v, m);
}

void temperature(RecipeConfig& c, const Value& v, Mode m) {
  const double t = v.number();
  if (t < 0) v.reject("must be >= 0 (0 is greedy)");
  assign(c.temperature, t, v, m);
}

void top_p(RecipeConfig& c, const Value& v, Mode m) {
  const double p = v.number();
  if (p <= 0 || p > 1) v.reject("must be in (0, 1]");
  assign(c.top_p, p, v, m);
}

void top_k(RecipeConfig& c, const Value& v, Mode m) {
  const int64_t k = v.integer();
  if (k < -1) v.reject("must be >= 1, or 0 / -1 for no top-k");
  assign(c.top_k, k, v, m);
}

void repetition_penalty(RecipeConfig& c, const Value& v, Mode m) {
  const double r = v.number();
  if (r <= 0) v.reject("must be > 0 (1 is none)");
  assign(c.repetition_penalty, r, v, m);
}

void max_new_tokens(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.max_new_tokens, v.positive(), v, m);
}

void seed(RecipeConfig& c, const Value& v, Mode m) {
  const int64_t s = v.integer();
  if (s < 0) v.reject("must be a non-negative integer");
  assign(c.seed, static_cast<uint64_t>(s), v, m);
}

void num_experts(RecipeConfig& c, const Value& v, Mode) {
  // Checked against n_routed_experts / num_experts of config.json (check_checkpoint).
  c.expected.push_back({"num_experts", v.positive(), v.origin()});
}

void experts_top_k(RecipeConfig& c, const Value& v, Mode) {
  c.expected.push_back({"num_experts_per_tok", v.positive(), v.origin()});
}

void capacity_factor(RecipeConfig& c, const Value& v, Mode m) {
  const double f = v.number();
  if (!(f > 0)) v.reject("must be positive (omit it to keep every assignment)");
  assign(c.capacity_factor, f, v, m);
}

void expert_parallel_mode(RecipeConfig&, const Value& v, Mode) {
  if (lower(v.string()) != "all_to_all") {
    v.reject(
        "only \"all_to_all\" dispatch is built (tokens travel to their experts' rank and "
        "back; in one process the exchange is a copy)");
  }
}

void communication_dtype(RecipeConfig& c, const Value& v, Mode m) {
  const std::string name = lower(v.string());
  std::string dtype;
  if (name == "fp16" || name == "float16") dtype = "fp16";
  if (name == "bf16" || name == "bfloat16") dtype = "bf16";
  if (name == "fp32" || name == "float32") dtype = "fp32";
  if (dtype.empty()) v.reject("expected fp16, bf16 or fp32");
  assign(c.communication_dtype, dtype, v, m);
}

void exe_mode(RecipeConfig&, const Value& v, Mode) {
  if (lower(v.string()) != "eager") {
    v.reject(
        "graph modes (ge_graph, npugraph_ex, acl_graph) capture a static NPU graph; this "
        "CPU build runs eager only: set exe_mode: \"eager\"");
  }
}

void next_n(RecipeConfig&, const Value& v, Mode) {
  const int64_t n = v.integer();
  if (n < 0) v.reject("must be >= 0");
  if (n > 0) {
    v.reject(
        "multi-token prediction (MTP speculative decoding) is not built yet; DeepSeek-V3's "
        "MTP layers are skipped at load: set next_n: 0");
  }
}

void force_eplb(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.enable_eplb, v.boolean(), v, m);
}

void num_redundant_experts(RecipeConfig& c, const Value& v, Mode m) {
  const int64_t n = v.integer();
  if (n < 0) v.reject("must be >= 0");
  assign(c.num_redundant_experts, n, v, m);
}

void eplb_window(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.eplb_window, v.positive(), v, m);
}

void eplb_interval(RecipeConfig& c, const Value& v, Mode m) {
  const int64_t n = v.integer();
  if (n < 0) v.reject("must be >= 0 (0: never re-balance online)");
  assign(c.eplb_interval, n, v, m);
}

void eplb_load_file(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.eplb_load_file, v.string(), v, m);
}

void eplb_record(RecipeConfig& c, const Value& v, Mode m) {
  assign(c.eplb_record, v.string(), v, m);
}

// vLLM's --eplb-config '{"window_size": .., "step_interval": .., "num_redundant_experts": ..}'
// (a JSON object, or its text from the command line); it implies --enable-eplb.
void eplb_config(RecipeConfig& c, const Value& v, Mode m) {
  nlohmann::json object = v.json();
  if (object.is_string()) {
    try {
      object = nlohmann::json::parse(object.get<std::string>());
    } catch (const nlohmann::json::exception&) {
      v.reject("expected a JSON object such as {\"window_size\": 1000, \"step_interval\": 3000}");
    }
  }
  if (!object.is_object()) v.reject("expected a JSON object");
  for (const auto& [key, value] : object.items()) {
    const Value item(value, str_cat(v.origin(), ".", key), false, key);
    if (key == "window_size") {
      eplb_window(c, item, m);
    } else if (key == "step_interval") {
      eplb_interval(c, item, m);
    } else if (key == "num_redundant_experts") {
      num_redundant_experts(c, item, m);
    } else if (key == "log_balancedness") {
      item.boolean();  // balancedness is always logged at re-balancing
    } else {
      v.reject("unknown key \"", key,
               "\" (known: window_size, step_interval, num_redundant_experts, "
               "log_balancedness)");
    }
  }
  assign(c.enable_eplb, true, v, m);
}

void enable_profiler(RecipeConfig&, const Value& v, Mode) {
  require_bool(v, false, "the profiler is not built yet: set it to false");
}

void with_ckpt(RecipeConfig&, const Value& v, Mode) {
  require_bool(v, true,
               "running without a checkpoint (random weights) is not supported; deepinfer "
               "always loads model_path: set it to true");
}

void dataset(RecipeConfig&, const Value& v, Mode) {
  if (lower(v.string()) != "default") {
    v.reject(
        "datasets are not bundled: `deepinfer run` takes prompts from the terminal, "
        "--prompt or the API (\"default\" is accepted and means exactly that)");
  }
}

void expect_integer(RecipeConfig& c, const Value& v, Mode) {
  c.expected.push_back({v.key(), v.positive(), v.origin()});
}
void expect_number(RecipeConfig& c, const Value& v, Mode) {
  const double number = v.number();
  if (number <= 0) v.reject("must be positive");
  c.expected.push_back({v.key(), number, v.origin()});
}
void expect_string(RecipeConfig& c, const Value& v, Mode) {
  c.expected.push_back({v.key(), v.string(), v.origin()});
}

}  // namespace set
}  // namespace deepinfer::config
