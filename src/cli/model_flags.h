#pragma once
// Flags shared by the commands that load a model: --model, --threads, --dtype.
#include <memory>
#include <set>
#include <string>

#include "cli/args.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"

namespace deepinfer::cli {

// Adds the shared value flags to a command's flag set.
std::set<std::string> with_model_flags(std::set<std::string> value_flags);

model::LoadOptions load_options_from(const Args& args);
std::unique_ptr<ThreadPool> thread_pool_from(const Args& args);

}  // namespace deepinfer::cli
