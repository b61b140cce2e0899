#pragma once
// `deepinfer generate --prompts-file FILE.jsonl`: many prompts through the serving engine at
// once. Each input line is {"prompt": "..."} or {"prompt_ids": [...]} plus optional sampling
// keys and "priority"; each output line (input order) is
// {"index", "prompt_ids", "output_ids", "text", "finish_reason"}.
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "engine/sampling_params.h"

namespace deepinfer::cli {

// Flags this mode reads besides the model and engine flags.
std::set<std::string> prompts_file_value_flags();

int run_prompts_file(const Args& args);

// One parsed input line.
struct PromptLine {
  std::string text;          // "prompt" (empty when ids are given)
  std::vector<int32_t> ids;  // "prompt_ids"
  bool has_text = false;
  engine::SamplingParams params;
  int64_t priority = 0;
};

// Parses one JSONL line; `defaults` supplies unset sampling keys; `where` names the line in
// errors. Unknown keys are errors.
PromptLine parse_prompt_line(const nlohmann::json& line, const engine::SamplingParams& defaults,
                             const std::string& where);

}  // namespace deepinfer::cli
