#include "cli/sampling_flags.h"

#include "core/error.h"

namespace deepinfer::cli {

std::set<std::string> with_sampling_value_flags(std::set<std::string> value_flags) {
  value_flags.insert(
      {"max-new-tokens", "temperature", "top-p", "top-k", "min-p", "seed", "repetition-penalty"});
  return value_flags;
}

engine::SamplingParams sampling_from_flags(const Args& args) {
  engine::SamplingParams p;
  p.temperature = args.get_double("temperature", 0.0);
  p.top_p = args.get_double("top-p", p.top_p);
  p.top_k = args.get_int("top-k", p.top_k);
  p.min_p = args.get_double("min-p", p.min_p);
  p.repetition_penalty = args.get_double("repetition-penalty", p.repetition_penalty);
  if (args.has("seed")) {
    const int64_t seed = args.get_int("seed", 0);
    DI_CHECK(seed >= 0, "--seed must be a non-negative integer, got ", seed);
    p.seed = static_cast<uint64_t>(seed);
  }
  p.max_new_tokens = args.get_int("max-new-tokens", 16);
  DI_CHECK(p.max_new_tokens >= 0, "--max-new-tokens must be >= 0, got ", p.max_new_tokens);
  p.ignore_eos = args.flag("ignore-eos");
  return p;
}

bool samples(const engine::SamplingParams& params) {
  return !params.greedy() || params.repetition_penalty != 1.0 || params.presence_penalty != 0 ||
         params.frequency_penalty != 0;
}

}  // namespace deepinfer::cli
