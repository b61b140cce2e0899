#include "cli/model_flags.h"

#include <algorithm>

#include "cli/engine_flags.h"
#include "config/apply.h"
#include "core/error.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::cli {
namespace {

const std::set<std::string> kModelSettingFlags = {
    "model", "threads",  "dtype",      "quantization",           "matmul-precision",
    "numa",  "cpu-mask", "cpu-strict", "transparent-huge-pages", "enable-atb-attention"};

const std::set<std::string> kParallelValueFlags = {
    "expert-parallel-size",  "tensor-parallel-size", "pipeline-parallel-size",
    "data-parallel-size",    "communication-dtype",  "capacity-factor",
    "num-redundant-experts", "eplb-window",          "eplb-interval",
    "eplb-load-file",        "eplb-record",          "eplb-config",
    "num-micro-batches",     "enable-atb-moe"};

}  // namespace

const char* const kParallelFlagsUsage =
    "  parallel (under mpirun, docs/DISTRIBUTED.md):\n"
    "  --expert-parallel-size N  split the routed experts over N ranks; N must equal the\n"
    "                            number of ranks: mpirun -np N deepinfer ...\n"
    "  --enable-expert-parallel  the same over every rank mpirun started\n"
    "  --tensor-parallel-size N (-tp)  --pipeline-parallel-size N (-pp)\n"
    "  --num-micro-batches M     pipeline: split each step's sequences into M parts that\n"
    "                            overlap across the stages (default 1)\n"
    "  --data-parallel-size N (-dp)    attention data parallelism (--enable-dp-attention:\n"
    "                            N = ranks / tensor-parallel size)\n"
    "  --communication-dtype fp32|bf16|fp16   rows of the expert all-to-alls (default fp32)\n"
    "  --capacity-factor F       drop assignments beyond ceil(F x tokens x top_k / experts)\n"
    "                            per expert over the expert group's tokens (default: none)\n"
    "  --enable-atb-moe true|false  grouped MoE on packed panels (default true; false: one\n"
    "                            GEMM per projection per expert, for A/B runs)\n"
    "  expert load balancing (EPLB):\n"
    "  --num-redundant-experts R extra expert slots (R a multiple of the ranks)\n"
    "  --eplb-window N           forward calls whose expert load counts (default 1000)\n"
    "  --eplb-interval N         re-balance online every N forward calls\n"
    "  --eplb-record FILE        write the expert load (JSON) as it is measured\n"
    "  --eplb-load-file FILE     place experts at start from a recorded load\n"
    "  --enable-eplb, --eplb-config '{\"window_size\":..,\"step_interval\":..,\n"
    "                            \"num_redundant_experts\":..}'  (vLLM's spellings)\n";

std::map<std::string, std::string> with_parallel_aliases(
    std::map<std::string, std::string> aliases) {
  aliases.emplace("tp", "tensor-parallel-size");
  aliases.emplace("pp", "pipeline-parallel-size");
  aliases.emplace("dp", "data-parallel-size");
  return aliases;
}

std::set<std::string> with_parallel_value_flags(std::set<std::string> value_flags) {
  value_flags.insert(kParallelValueFlags.begin(), kParallelValueFlags.end());
  return value_flags;
}

std::set<std::string> with_parallel_bool_flags(std::set<std::string> bool_flags) {
  bool_flags.insert("enable-expert-parallel");
  bool_flags.insert("enable-eplb");
  bool_flags.insert("enable-dp-attention");
  return bool_flags;
}

void apply_parallel_flags(config::RecipeConfig& config, const Args& args) {
  apply_setting_flags(config, args, kParallelValueFlags);
  apply_setting_flags(config, args, {"enable-eplb"});
  // Both spread over a pipeline stage: the ranks mpirun started / the pipeline size.
  const int64_t stage = parallel::launcher_world_size() /
                        std::max<int64_t>(config.pipeline_parallel_size.value_or(1), 1);
  if (args.flag("enable-dp-attention")) {  // SGLang: attention DP over the stage's TP groups
    const int64_t dp = stage / std::max<int64_t>(config.tensor_parallel_size.value_or(1), 1);
    DI_CHECK(!config.data_parallel_size.has() || *config.data_parallel_size == dp,
             "--enable-dp-attention gives each of the ", dp,
             " tensor-parallel groups of a stage its own sequences, but ",
             config.data_parallel_size.origin, " = ", *config.data_parallel_size,
             ": give one of them");
    config::apply_override(config, "data_parallel_size", std::max<int64_t>(dp, 1),
                           "--enable-dp-attention");
  }
  if (args.flag("enable-expert-parallel")) {
    const int64_t world = stage;
    DI_CHECK(!config.expert_parallel_size.has() || *config.expert_parallel_size == world,
             "--enable-expert-parallel spreads the experts over the ", world,
             " ranks of a pipeline stage, but ", config.expert_parallel_size.origin, " = ",
             *config.expert_parallel_size, ": give one of them");
    config::apply_override(config, "expert_parallel_size", world, "--enable-expert-parallel");
  }
}

const char* const kModelFlagsUsage =
    "  memory and threads (llama.cpp's spellings):\n"
    "  --mlock                   lock the weights in RAM (needs RLIMIT_MEMLOCK, `ulimit -l`;\n"
    "                            if refused: a warning, and the run goes on unlocked)\n"
    "  --no-mmap                 read the weights into memory instead of mapping the files\n"
    "  --transparent-huge-pages true|false  madvise huge pages for the KV pool and weights\n"
    "                            (default true)\n"
    "  --numa distribute|isolate|numactl  pin the compute threads by NUMA node\n"
    "  --cpu-mask HEX            compute threads only on these CPUs (bit i = CPU i)\n"
    "  --cpu-strict 0|1          thread i on the i-th CPU of the mask\n"
    "  --enable-atb-attention true|false  false: unfused attention and residual norms (A/B)\n"
    "  --quantize-lm-head        with --quantization: the lm_head (and a tied embedding) too,\n"
    "                            q6_k (q8_0 for q8_0 or rows not whole 256-element blocks)\n";

std::set<std::string> with_model_bool_flags(std::set<std::string> bool_flags) {
  bool_flags.insert({"mlock", "no-mmap", "quantize-lm-head"});
  return bool_flags;
}

std::set<std::string> with_model_flags(std::set<std::string> value_flags) {
  value_flags.insert(kModelSettingFlags.begin(), kModelSettingFlags.end());
  value_flags.insert("log-level");
  return value_flags;
}

void apply_setting_flags(config::RecipeConfig& config, const Args& args,
                         const std::set<std::string>& flags) {
  for (const std::string& flag : flags) {
    const auto value = args.get(flag);
    if (!value) continue;
    std::string key = flag;
    std::replace(key.begin(), key.end(), '-', '_');
    config::apply_override(config, key, *value, "--" + flag, true);
  }
}

void apply_engine_flags(config::RecipeConfig& config, const Args& args) {
  apply_setting_flags(config, args, with_engine_value_flags({}));
  DI_CHECK(!(args.flag("enable-prefix-caching") && args.flag("no-enable-prefix-caching")),
           "give one of --enable-prefix-caching and --no-enable-prefix-caching");
  std::set<std::string> bools = with_engine_bool_flags({});
  bools.erase("no-enable-prefix-caching");
  apply_setting_flags(config, args, bools);
  if (args.flag("no-enable-prefix-caching")) {
    config::apply_override(config, "enable_prefix_caching", false, "--no-enable-prefix-caching");
  }
}

void apply_memory_flags(config::RecipeConfig& config, const Args& args) {
  if (args.flag("mlock")) config::apply_override(config, "mlock", true, "--mlock");
  if (args.flag("no-mmap")) config::apply_override(config, "mmap", false, "--no-mmap");
}

void apply_quantize_lm_head_flag(config::RecipeConfig& config, const Args& args,
                                 const std::string& flag) {
  if (args.flag(flag)) config::apply_override(config, "quantize_lm_head", true, "--" + flag);
}

void apply_model_flags(config::RecipeConfig& config, const Args& args) {
  apply_setting_flags(config, args, kModelSettingFlags);
  apply_memory_flags(config, args);
  apply_quantize_lm_head_flag(config, args);
}

config::RecipeConfig recipe_from_flags(const Args& args, bool engine_flags) {
  config::RecipeConfig config;
  apply_model_flags(config, args);
  apply_parallel_flags(config, args);
  if (engine_flags) apply_engine_flags(config, args);
  return config;
}

model::LoadOptions load_options_from(const Args& args) {
  config::RecipeConfig config;
  apply_setting_flags(config, args, {"dtype", "quantization", "transparent-huge-pages"});
  apply_memory_flags(config, args);
  apply_quantize_lm_head_flag(config, args);
  return config::load_options(config);
}

}  // namespace deepinfer::cli
