#pragma once
// The requests a benchmark sends: random token-id prompts (--dataset-name random) or a
// dataset file's prompts (src/bench/dataset.h), each with its output length. Warm-up
// requests come first in the same sequence; a sequence longer than the prompt list cycles it.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/dataset.h"
#include "cli/bench/options.h"

namespace deepinfer::cli::bench {

struct BenchRequest {
  std::string prompt;               // text; empty for token-id prompts
  std::vector<int32_t> prompt_ids;  // random prompts, or the text's ids when known
  int64_t output_len = 0;
};

struct Workload {
  std::vector<BenchRequest> prompts;  // cycled
  std::string source;                 // "random" or the dataset path
  // Request i of the run (warm-up ones first).
  const BenchRequest& at(int64_t i) const {
    return prompts[static_cast<size_t>(i) % prompts.size()];
  }
};

using Encoder = std::function<std::vector<int32_t>(std::string_view)>;

struct WorkloadContext {
  Encoder encode;                    // empty when no tokenizer is at hand (online, no model dir)
  bool encode_prompts = false;       // keep the ids of text prompts (offline)
  int64_t vocab_size = 0;            // random ids are drawn below it
  int64_t default_output_len = 128;  // the config's max_new_tokens, else vLLM's 128
  // The dataset file's entries (read_dataset_of, before the model loads); unused for random.
  const std::vector<deepinfer::bench::DatasetEntry>* dataset = nullptr;
};

// The entries of --dataset (empty for random prompts): read first, so a bad file fails before
// any weight is loaded.
std::vector<deepinfer::bench::DatasetEntry> read_dataset_of(const BenchOptions& options);

// Throws Error naming the flag or file when the prompts cannot be made.
Workload make_workload(const BenchOptions& options, const WorkloadContext& context);

}  // namespace deepinfer::cli::bench
