#pragma once
// Benchmark prompt sets: a JSON list of prompts (strings or {"prompt": ...}), the same one
// per line (jsonl), or ShareGPT conversations ({"conversations": [{"from": "human", "value":
// ...}, {"from": "gpt", ...}]}, as vLLM's --dataset-name sharegpt reads them: the first human
// turn is the prompt, the answer after it gives the output length when none is set).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::bench {

enum class DatasetFormat {
  automatic,  // each element by its shape: a string, {"prompt"} or {"conversations"}
  sharegpt,   // every element must be a conversation
};

struct DatasetEntry {
  std::string prompt;
  // The reference answer (ShareGPT's gpt turn after the prompt): its token count is the
  // output length when neither the entry nor the command line sets one.
  std::optional<std::string> reference_output;
  std::optional<int64_t> output_len;  // an entry's "output_len" or "max_tokens"
};

// Reads `path`; throws Error naming the file (and the line of a jsonl file, or the element)
// when it is missing, malformed, empty, or ShareGPT data without a human turn.
std::vector<DatasetEntry> read_dataset(const std::string& path, DatasetFormat format);

// The parser behind read_dataset, on text in memory; `source` names it in errors. Text whose
// first non-blank byte is '[' is one JSON list, anything else jsonl (blank lines skipped).
std::vector<DatasetEntry> parse_dataset(std::string_view text, const std::string& source,
                                        DatasetFormat format);

DatasetFormat parse_dataset_format(const std::string& name);  // "sharegpt", "auto"

}  // namespace deepinfer::bench
