#pragma once
// Flags of the commands that run the serving engine (generate --prompts-file, bench, serve):
// KV pool, scheduler budgets, prefix caching, policy. Config-file keys use the same names
// with underscores.
#include <set>
#include <string>

#include "cli/args.h"
#include "engine/engine.h"
#include "io/hf_config.h"

namespace deepinfer::cli {

// Help text listing the engine flags (for a command's usage).
extern const char* const kEngineFlagsUsage;

std::set<std::string> with_engine_value_flags(std::set<std::string> value_flags);
std::set<std::string> with_engine_bool_flags(std::set<std::string> bool_flags);

// Reads the engine flags; eos ids come from generation_config.json.
engine::EngineConfig engine_config_from(const Args& args, const io::GenerationConfig& generation);

// Peak resident set size of this process in MiB (VmHWM of /proc/self/status); 0 if unknown.
double peak_rss_mib();

}  // namespace deepinfer::cli
