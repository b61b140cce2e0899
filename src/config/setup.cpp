#include "config/setup.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cache/block_manager.h"
#include "config/apply.h"
#include "config/progress.h"
#include "config/rank_consistency.h"
#include "core/log.h"
#include "engine/lockstep.h"
#include "io/gguf_model.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "parallel/heartbeat.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

uint64_t checkpoint_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& file : io::Checkpoint::weight_files(dir)) total += fs::file_size(file);
  return total;
}

// mem_fraction_static: weights + KV cache within that share of RAM, the KV pool no larger
// than max_num_seqs sequences of max_model_len tokens need.
void size_pool_by_memory_fraction(const RecipeConfig& config, const model::CausalLM& model,
                                  uint64_t weight_bytes, engine::EngineConfig& ec) {
  const double fraction = *config.mem_fraction_static;
  const uint64_t total = memory_total_bytes();
  if (total == 0) {
    throw ConfigError(str_cat(config.mem_fraction_static.origin,
                              ": cannot read MemTotal from /proc/meminfo to size the KV cache; "
                              "use max_num_blocks instead"));
  }
  const double budget = fraction * static_cast<double>(total) - static_cast<double>(weight_bytes);
  if (budget <= 0) {
    throw ConfigError(str_cat(config.mem_fraction_static.origin, " = ", fraction,
                              " leaves no memory for the KV cache: the weights take ",
                              fixed(static_cast<double>(weight_bytes) / (1ull << 30), 2),
                              " GiB of ", fixed(static_cast<double>(total) / (1ull << 30), 2),
                              " GiB; raise it"));
  }
  cache::KvCacheSpec spec = model::kv_cache_spec(model, ec.block_size, 1);
  spec.dtype = ec.kv_cache_dtype;
  const int64_t budget_blocks = cache::BlockManager::blocks_for_memory(
      budget / static_cast<double>(1ull << 30), spec.bytes_per_token(), ec.block_size);
  const int64_t model_max = model.config().max_position_embeddings;
  const int64_t len = ec.max_model_len > 0 ? ec.max_model_len : model_max > 0 ? model_max : 8192;
  const int64_t wanted = ec.max_num_seqs * ((len + ec.block_size - 1) / ec.block_size);
  ec.max_num_blocks = std::max<int64_t>(1, std::min(budget_blocks, wanted));
  log::info("mem_fraction_static ", fraction, ": ",
            fixed(fraction * static_cast<double>(total) / (1ull << 30), 1),
            " GiB for weights + KV cache; KV pool ", ec.max_num_blocks, " blocks");
}

bool mpirun_on_path() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, colon - start)) / "mpirun";
    std::error_code ec;
    if (colon > start && fs::is_regular_file(candidate, ec) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return true;
    start = colon + 1;
  }
  return false;
}

// Compute threads of this rank: `threads`; else without mpirun the devices listed (their
// count), else all cores; under mpirun, where devices name ranks, this host's cores shared
// by the ranks mpirun put on it.
// Says how the weights and the KV pool are held (the architecture guide: logs say what runs).
void log_memory_options(const MemoryOptions& memory) {
  const std::string thp = thp_mode();
  log::info(
      "memory: weights ", memory.mmap ? "mapped" : "read into anonymous memory (--no-mmap)",
      memory.mlock ? ", locked (--mlock)" : "", "; transparent huge pages ",
      !memory.huge_pages ? "off (--transparent-huge-pages false)"
      : thp == "never"
          ? "not available (the kernel's mode is \"never\")"
          : str_cat("advised for the KV pool, packed and anonymous weights (kernel: ", thp, ")"));
}

int64_t rank_threads(const RecipeConfig& config) {
  if (config.threads.has() || parallel::launcher_world_size() == 1) return thread_count(config);
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int64_t ranks_here = local != nullptr ? std::max(1L, std::strtol(local, nullptr, 10)) : 1;
  const auto cores = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max<int64_t>(1, cores / ranks_here);
}

parallel::GroupSize group_size(const Setting<int64_t>& setting, const char* name) {
  return {setting.value_or(1), setting.has() ? setting.origin : std::string(name)};
}

// The request the config makes. The YAML's parallel_config gives world_size, attn_tp_size and
// moe_tp_size: attention data parallel = world_size / attn_tp_size, expert parallel =
// world_size / moe_tp_size (the recipes' definitions).
parallel::ParallelRequest parallel_request(const RecipeConfig& config) {
  parallel::ParallelRequest request{
      .tensor = group_size(config.tensor_parallel_size, "tensor_parallel_size"),
      .pipeline = group_size(config.pipeline_parallel_size, "pipeline_parallel_size"),
      .expert = group_size(config.expert_parallel_size, "expert_parallel_size"),
      .data = group_size(config.data_parallel_size, "data_parallel_size")};
  if (!config.world_size.has()) return request;
  const int64_t world = *config.world_size;
  const auto derived = [&](const Setting<int64_t>& tp, const char* what) {
    if (world % *tp != 0) {
      throw ConfigError(str_cat(tp.origin, " = ", *tp, " does not divide ",
                                config.world_size.origin, " = ", world, " (", what, ")"));
    }
    return world / *tp;
  };
  if (config.attn_tp_size.has()) {
    request.tensor = {*config.attn_tp_size, config.attn_tp_size.origin};
    request.data = {derived(config.attn_tp_size, "attention data parallel = world / attn_tp"),
                    config.attn_tp_size.origin + " (attention data parallel = world_size / it)"};
  }
  if (config.moe_tp_size.has()) {
    request.expert = {derived(config.moe_tp_size, "expert parallel = world / moe_tp"),
                      config.moe_tp_size.origin + " (expert parallel = world_size / it)"};
  }
  return request;
}

// The parallel layout the config asks for, checked against the launcher and the checkpoint
// before any weight is read (every rank refuses alike).
std::shared_ptr<parallel::ParallelContext> parallel_layout(const RecipeConfig& config,
                                                           const io::ModelConfig& model,
                                                           const std::string& dir,
                                                           const SetupOptions& options) {
  const parallel::ParallelRequest request = parallel_request(config);
  const int launched = parallel::launcher_world_size();
  const int64_t needed = parallel::ParallelSizes::world_for(request);
  if (config.world_size.has() && *config.world_size != launched && launched > 1) {
    throw ConfigError(str_cat(config.world_size.origin, " = ", *config.world_size,
                              " but mpirun started ", launched, " ranks"));
  }
  if (!options.lockstep && (needed > 1 || launched > 1)) {
    throw ConfigError(str_cat(needed > 1 ? parallel::describe_request(request)
                                         : str_cat("mpirun with ", launched, " ranks"),
                              ": this runs in one process only (docs/DISTRIBUTED.md lists the "
                              "commands that run under mpirun)"));
  }
  if (config.devices.has() && launched > 1 &&
      static_cast<int64_t>(config.devices->size()) != launched) {
    throw ConfigError(str_cat(config.devices.origin, " lists ", config.devices->size(),
                              " devices but mpirun started ", launched,
                              " ranks: under mpirun it names one device per rank (mpirun -np ",
                              config.devices->size(), ")"));
  }
  const parallel::GroupSize& pp = request.pipeline;
  if (request.data.size > 1 && pp.size > 1) {
    throw ConfigError(str_cat(request.data.origin, " = ", request.data.size, " with ", pp.origin,
                              " = ", pp.size,
                              ": attention data parallelism across pipeline stages is not built "
                              "yet; use one of them"));
  }
  if (pp.size > model.num_hidden_layers) {
    throw ConfigError(str_cat(pp.origin, " = ", pp.size, " is more than the ",
                              model.num_hidden_layers, " decoder layers of ", dir,
                              "/config.json: every pipeline stage needs at least one layer"));
  }
  if (config.num_micro_batches.has() && *config.num_micro_batches > 1 && pp.size == 1) {
    throw ConfigError(str_cat(config.num_micro_batches.origin, " = ", *config.num_micro_batches,
                              ": micro-batches overlap pipeline stages, and there is one "
                              "stage; give --pipeline-parallel-size > 1 or set it to 1"));
  }
  if (needed > 1 && launched == 1) {
    // Said here rather than by ParallelContext::create so that it can tell whether mpirun
    // is there at all.
    throw ConfigError(str_cat(
        parallel::describe_request(request), " needs ", needed,
        " processes, one per rank, and this one was not started by mpirun: ",
        mpirun_on_path() ? str_cat("launch it as `mpirun -np ", needed, " deepinfer ...`")
                         : str_cat("mpirun is not installed (Debian: apt-get install openmpi-bin), "
                                   "then launch it as `mpirun -np ",
                                   needed, " deepinfer ...`"),
        " (docs/DISTRIBUTED.md)"));
  }
  const parallel::GroupSize& ep = request.expert;
  if (ep.size > 1) {
    const int64_t experts = routed_experts(model);
    if (experts == 0) {
      throw ConfigError(str_cat(ep.origin, " = ", ep.size, " but ", dir,
                                "/config.json describes a dense model: there are no routed "
                                "experts to split; set it to 1"));
    }
    if (experts % ep.size != 0) {
      throw ConfigError(str_cat(ep.origin, " = ", ep.size, " does not divide the ", experts,
                                " routed experts of ", dir,
                                "/config.json: every rank must hold the same number"));
    }
  }
  if (launched > 1 && needed == 1) {
    throw ConfigError(str_cat("mpirun started ", launched,
                              " ranks but no parallel layout was asked for: give "
                              "--expert-parallel-size ",
                              launched,
                              " (or --enable-expert-parallel) so the ranks share the "
                              "experts (docs/DISTRIBUTED.md)"));
  }
  if (launched > 1 && needed != launched) {
    throw ConfigError(str_cat(parallel::describe_request(request), " needs ", needed,
                              " ranks (pipeline x max(tensor x data, expert)) but mpirun started ",
                              launched));
  }
  try {
    return parallel::ParallelContext::create(request);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace

std::shared_ptr<parallel::ParallelContext> parallel_context_for(const RecipeConfig& config) {
  const std::string dir = resolve_model_path(config);
  const io::ModelConfig model_config = io::ModelConfig::load(dir);
  auto context = parallel_layout(config, model_config, dir, {.lockstep = true});
  if (context->distributed()) check_ranks_agree(*context->world(), dir);
  return context;
}

bool is_lockstep_worker(const ModelSetup& setup) {
  return setup.parallel && !setup.parallel->is_driver();
}

bool launched_as_worker() {
  return parallel::launcher_world_size() > 1 && parallel::launcher_rank() != 0;
}

int run_lockstep_worker(ModelSetup& setup) {
  model::CausalLM* const models[] = {setup.model.get()};
  return run_lockstep_worker(models, setup);
}

int run_lockstep_worker(std::span<model::CausalLM* const> models, ModelSetup& setup) {
  DI_CHECK(is_lockstep_worker(setup), "run_lockstep_worker: rank 0 drives, it does not follow");
  const int64_t steps = engine::run_lockstep_worker(models, *setup.parallel->world(), *setup.pool,
                                                    setup.parallel.get());
  const parallel::CommunicationStats comm = parallel::communication_stats();
  log::info("lockstep worker ", setup.parallel->describe(), ": ", steps,
            " steps, stopped by rank 0; in MPI during steps ", fixed(comm.busy_seconds, 3), " s (",
            fixed(static_cast<double>(comm.bytes_sent) / (1 << 20), 1),
            " MiB sent), waiting for steps ", fixed(comm.idle_seconds, 3), " s");
  if (setup.heartbeat) setup.heartbeat->stop();  // leaves in order: rank 0 expects no more
  return 0;
}

int follow_driver(const RecipeConfig& config) {
  ModelSetup setup = load_model_setup(
      config, {.require_tokenizer = false, .progress_bar = false, .lockstep = true});
  return run_lockstep_worker(setup);
}

ModelSetup load_model_setup(const RecipeConfig& config, const SetupOptions& options) {
  ModelSetup s;
  s.dir = resolve_model_path(config);

  // Everything checkable without weights first: a bad config loads nothing.
  const io::ModelConfig model_config = io::ModelConfig::load(s.dir);
  check_checkpoint(config, model_config, s.dir);
  s.generation = io::GenerationConfig::load(s.dir, model_config);
  s.sampling = sampling_defaults(config, s.generation);
  s.engine = engine_config(config, s.generation);
  check_max_model_len(config, s.engine, model_config, s.dir);
  s.parallel = parallel_layout(config, model_config, s.dir, options);
  if (s.parallel->distributed()) {
    // Beside everything that follows (loading included), so a silent rank is found anyway.
    s.heartbeat = parallel::Heartbeat::start(parallel::heartbeat_timeout_from_env());
    check_ranks_agree(*s.parallel->world(), s.dir);
  }
  // Each attention group has its own KV pool of the configured size, on its own ranks.
  s.engine.attention_groups = s.parallel->data_parallel_size();
  const std::string tokenizer_dir = config.tokenizer_path.value_or(s.dir);
  if (config.tokenizer_path.has() && !fs::is_directory(tokenizer_dir)) {
    throw ConfigError(str_cat(config.tokenizer_path.origin, " = \"", tokenizer_dir,
                              "\": not a directory (it holds tokenizer.json and "
                              "tokenizer_config.json)"));
  }
  // A GGUF file carries its own tokenizer (tokenizer.ggml.*).
  const bool has_tokenizer = fs::exists(fs::path(tokenizer_dir) / "tokenizer.json") ||
                             (!config.tokenizer_path.has() && io::gguf_model_file(s.dir));
  if (config.tokenizer_path.has() && !has_tokenizer) {
    throw ConfigError(str_cat(config.tokenizer_path.origin, " = \"", tokenizer_dir,
                              "\": no tokenizer.json there"));
  }
  if (options.require_tokenizer && !has_tokenizer) {
    fail(s.dir,
         ": no tokenizer.json; serving, chatting and the Python API take text, so the model "
         "directory needs its tokenizer (or pass --tokenizer DIR)");
  }
  if (config.chat_template.has() && !fs::is_regular_file(*config.chat_template)) {
    throw ConfigError(str_cat(config.chat_template.origin, " = \"", *config.chat_template,
                              "\": no such file (a Jinja chat template)"));
  }

  if (config.matmul_precision.has()) {
    kernels::set_matmul_precision(kernels::parse_matmul_precision(*config.matmul_precision));
  }
  log::info("loading model from ", s.dir);
  const auto start = Clock::now();
  model::LoadOptions load = load_options(config);
  // Read (--no-mmap) or locked weights are faulted in by the load itself.
  if (load.memory.mmap && !load.memory.mlock) prefault_checkpoint(s.dir, options.progress_bar);
  log_memory_options(load.memory);
  load.parallel = s.parallel;
  s.model = model::load_model(s.dir, load);
  if (s.parallel->distributed() && s.parallel->is_driver()) {
    s.model = std::make_unique<engine::LockstepModel>(std::move(s.model), s.parallel->world(),
                                                      s.parallel, options.lockstep_index);
  }
  if (has_tokenizer) s.tokenizer = tokenizer::Tokenizer::load_dir(tokenizer_dir);
  log::info(
      "model loaded in ", fixed(std::chrono::duration<double>(Clock::now() - start).count(), 2),
      " s (", model_config.architecture, ", ", model_config.num_hidden_layers, " layers, weights ",
      config.dtype.value_or("auto") == "auto" ? "as stored" : *config.dtype,
      config.quantization.value_or("none") == "none"
          ? ""
          : str_cat(", projections quantized to ", *config.quantization,
                    config.quantize_lm_head.value_or(false) ? ", lm_head too" : ""),
      ", matmul precision ", kernels::matmul_precision_name(kernels::matmul_precision()),
      kernels::matmul_precision() == kernels::MatmulPrecision::bf16
          ? str_cat(" (", kernels::bf16_activation_path(), ")")
          : "",
      load.fused_attention ? ""
                           : ", unfused attention and residual norms (enable_atb_attention false)",
      ")");
  if (is_test_model(model_config)) {
    log::warn(s.dir,
              " is a random-weight test model (config.json: \"deepinfer_test_model\": true): "
              "its output is not meaningful text");
  }

  const auto threads = static_cast<int>(rank_threads(config));
  CpuPlacement placement =
      cpu_placement(config, threads > 0 ? threads : ThreadPool::online_cores());
  if (!placement.summary.empty()) log::info(placement.summary);
  s.pool = std::make_unique<ThreadPool>(threads, std::move(placement));
  if (config.mem_fraction_static.has()) {
    size_pool_by_memory_fraction(config, *s.model, checkpoint_bytes(s.dir), s.engine);
  }
  return s;
}

}  // namespace deepinfer::config
