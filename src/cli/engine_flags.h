#pragma once
// Flags of the commands that run the serving engine (generate --prompts-file, bench, serve):
// KV pool, scheduler budgets, prefix caching, policy. They are recipe settings: the flags
// are read by apply_setting_flags (cli/model_flags.h) into config keys of the same names
// with underscores.
#include <set>
#include <string>

namespace deepinfer::cli {

// Help text listing the engine flags (for a command's usage).
extern const char* const kEngineFlagsUsage;

std::set<std::string> with_engine_value_flags(std::set<std::string> value_flags);
// --no-enable-prefix-caching (vLLM's negation) is not a setting of its own: see
// apply_engine_flags (model_flags.h).
std::set<std::string> with_engine_bool_flags(std::set<std::string> bool_flags);

// Peak resident set size in MiB (VmHWM of /proc/PID/status) of process `pid`, 0: this one;
// 0 if unknown.
double peak_rss_mib(int pid = 0);

}  // namespace deepinfer::cli
