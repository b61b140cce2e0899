#pragma once
// Sampling flags of `deepinfer generate` (a single prompt and --prompts-file alike):
// --temperature --top-p --top-k --min-p --seed --repetition-penalty, plus --max-new-tokens
// and --ignore-eos. The default is greedy (temperature 0), unlike the server, whose requests
// take generation_config.json's defaults.
#include <set>
#include <string>

#include "cli/args.h"
#include "engine/sampling_params.h"

namespace deepinfer::cli {

std::set<std::string> with_sampling_value_flags(std::set<std::string> value_flags);

// The request parameters the flags ask for (checked later against the model's vocabulary by
// SamplingParams::validate).
engine::SamplingParams sampling_from_flags(const Args& args);

// True when the flags ask for more than plain greedy decoding (a temperature above 0, or a
// repetition penalty): such a prompt runs through the engine's sampler.
bool samples(const engine::SamplingParams& params);

}  // namespace deepinfer::cli
