#include "cli/bench/workload.h"

#include <random>

#include "bench/dataset.h"
#include "core/error.h"
#include "core/log.h"

namespace deepinfer::cli::bench {
namespace {

// Enough distinct random prompts to cycle through when --duration sets no count.
constexpr int64_t kDurationPrompts = 1024;

Workload random_workload(const BenchOptions& o, const WorkloadContext& context) {
  DI_CHECK(context.vocab_size > 0,
           "random prompts are token ids: bench needs the model's tokenizer (--model or --config "
           "naming a directory with tokenizer.json or a .gguf file), or give a --dataset file "
           "of text prompts");
  Workload w;
  w.source = "random";
  std::mt19937_64 rng(o.seed);
  const int64_t count = o.warmup + (o.num_samples > 0 ? o.num_samples : kDurationPrompts);
  for (int64_t i = 0; i < count; ++i) {
    BenchRequest r;
    r.prompt_ids.resize(static_cast<size_t>(*o.input_len));
    for (auto& t : r.prompt_ids) {
      t = static_cast<int32_t>(rng() % static_cast<uint64_t>(context.vocab_size));
    }
    r.output_len = o.output_len.value_or(context.default_output_len);
    w.prompts.push_back(std::move(r));
  }
  return w;
}

}  // namespace

std::vector<deepinfer::bench::DatasetEntry> read_dataset_of(const BenchOptions& o) {
  if (o.dataset_name == "random") return {};
  DI_CHECK(!o.input_len, "--input-len sets the length of random prompts; a dataset's prompts ",
           "keep their own length");
  return deepinfer::bench::read_dataset(*o.dataset_path,
                                        deepinfer::bench::parse_dataset_format(o.dataset_name));
}

Workload make_workload(const BenchOptions& o, const WorkloadContext& context) {
  if (o.dataset_name == "random") return random_workload(o, context);
  const std::string& path = *o.dataset_path;
  DI_CHECK(context.dataset, "make_workload: the dataset was not read");
  const auto& entries = *context.dataset;
  Workload w;
  w.source = path;
  for (const auto& entry : entries) {
    BenchRequest r;
    r.prompt = entry.prompt;
    if (o.output_len) {
      r.output_len = *o.output_len;
    } else if (entry.output_len) {
      r.output_len = *entry.output_len;
    } else if (entry.reference_output) {
      // As vLLM's ShareGPT reader: the reference answer's length in tokens.
      DI_CHECK(context.encode, path,
               ": ShareGPT output lengths are counted in the model's tokens: give --output-len, "
               "or the model (--model / --config) whose tokenizer counts them");
      r.output_len = std::max<int64_t>(
          1, static_cast<int64_t>(context.encode(*entry.reference_output).size()));
    } else {
      r.output_len = context.default_output_len;
    }
    if (context.encode_prompts) r.prompt_ids = context.encode(r.prompt);
    w.prompts.push_back(std::move(r));
  }
  const int64_t wanted = o.warmup + o.num_samples;
  if (o.num_samples > 0 && wanted > static_cast<int64_t>(w.prompts.size())) {
    log::info("bench: ", path, " holds ", w.prompts.size(), " prompts; cycling through them for ",
              wanted, " requests (", o.warmup, " warm-up)");
  }
  return w;
}

}  // namespace deepinfer::cli::bench
