#pragma once
// What every command that runs a model loads from --model DIR (with --threads / --dtype):
// the thread pool, the checkpoint, generation_config.json and, when the directory has
// tokenizer.json, the tokenizer. Shared by generate, generate --prompts-file and serve.
#include <memory>
#include <optional>
#include <string>

#include "cli/args.h"
#include "core/thread_pool.h"
#include "io/hf_config.h"
#include "model/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

struct LoadedModel {
  std::string dir;
  std::unique_ptr<ThreadPool> pool;  // declared first: outlives the model
  std::unique_ptr<model::CausalLM> model;
  io::GenerationConfig generation;
  std::optional<tokenizer::Tokenizer> tokenizer;
  double load_seconds = 0;  // the checkpoint alone
};

// Loads --model DIR and logs the load time. Throws Error naming what is wrong.
LoadedModel load_model_from_flags(const Args& args);

}  // namespace deepinfer::cli
