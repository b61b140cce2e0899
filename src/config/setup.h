#pragma once
// The one set-up path of every command that runs a model (generate, bench, serve, run, the
// Python binding): a RecipeConfig, whether it came from a recipe file, command-line flags or
// keyword arguments, is checked against the checkpoint before any weight is read, then the
// checkpoint, generation_config.json, the tokenizer and the thread pool are loaded and the
// engine options resolved. config::Runtime (runtime.h) adds the engine, warm-up and client;
// generate and bench build their engine (or greedy loop) on the set-up directly.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "config/recipe_config.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/sampling_params.h"
#include "io/hf_config.h"
#include "model/causal_lm.h"
#include "parallel/heartbeat.h"
#include "parallel/parallel_context.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::config {

struct SetupOptions {
  // Commands that take text (serve, run, Python) need tokenizer.json; generate and bench can
  // work on token ids alone.
  bool require_tokenizer = true;
  bool progress_bar = true;  // drawn only when stderr is a terminal
  // The command runs distributed (generate, bench, serve, run, validate, Python): under
  // mpirun, rank 0's model is a LockstepModel and the caller runs the other ranks through
  // run_lockstep_worker. Other callers refuse a parallel size > 1 or an mpirun world.
  bool lockstep = false;
  // This model's place among the models one command loads (validate loads two), in load
  // order on every rank: rank 0's steps name it and the workers follow each.
  int64_t lockstep_index = 0;
};

struct ModelSetup {
  std::string dir;  // model_path resolved
  // World and expert group; one process unless launched by mpirun. Declared before the
  // model, whose layers hold its communicators.
  std::shared_ptr<parallel::ParallelContext> parallel;
  // Distributed runs: the liveness watch of the ranks (parallel/heartbeat.h); null otherwise.
  // Before the model, so it outlives the LockstepModel's stop message.
  std::shared_ptr<parallel::Heartbeat> heartbeat;
  io::GenerationConfig generation;
  engine::EngineConfig engine;       // the config's engine options (pool sized when it says how)
  engine::SamplingParams sampling;   // request defaults: generation_config.json, then the config
  std::unique_ptr<ThreadPool> pool;  // declared before the model: outlives it
  std::unique_ptr<model::CausalLM> model;
  std::optional<tokenizer::Tokenizer> tokenizer;  // when the directory has tokenizer.json
};

// Resolves and checks `config` (ConfigError: nothing was loaded), then loads, logging
// "loading model from DIR" / "model loaded in N s (...)". Bad weights throw Error.
ModelSetup load_model_setup(const RecipeConfig& config, const SetupOptions& options = {});

// The parallel layout of a command that loads a model without running it (info): what
// `config` asks for, checked against the checkpoint and, under mpirun, between the ranks
// (rank_consistency.h). One process unless launched by mpirun.
std::shared_ptr<parallel::ParallelContext> parallel_context_for(const RecipeConfig& config);

// Ranks > 0 of a distributed run (SetupOptions::lockstep) follow rank 0: a command checks
// is_lockstep_worker right after load_model_setup and returns run_lockstep_worker's status
// (for several models: the models of every set-up, in load order; `setup` any one of them).
bool is_lockstep_worker(const ModelSetup& setup);
int run_lockstep_worker(ModelSetup& setup);
int run_lockstep_worker(std::span<model::CausalLM* const> models, ModelSetup& setup);
// From mpirun's environment alone (before anything is loaded): this process is a rank > 0.
// Commands whose rank 0 does more than load a model (serve binds a port) ask first and
// then follow_driver: load what `config` says and follow rank 0's steps until it stops.
bool launched_as_worker();
int follow_driver(const RecipeConfig& config);

}  // namespace deepinfer::config
