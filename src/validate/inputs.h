#pragma once
// What deepinfer validate runs the models on: prompts (a jsonl file, the committed fixed set, or
// random token ids) and a text for perplexity.
#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::validate {

struct ValidationPrompt {
  std::string name;  // "FILE:LINE", "random-3", ...
  std::vector<int32_t> ids;
};

// One JSON object per line: {"prompt": "text"} (encoded with the tokenizer's special tokens, as
// transformers' tokenizer(text)) or {"prompt_token_ids": [...]}; blank lines are skipped. Errors
// name the file and line: a missing file, a line that is not JSON, neither key, ids outside
// [0, vocab), text without a tokenizer.
std::vector<ValidationPrompt> read_prompts_jsonl(const std::string& path,
                                                 const tokenizer::Tokenizer* tok, int64_t vocab);

// `count` prompts of `length` token ids drawn uniformly from [0, vocab) by a seeded generator
// (std::mt19937_64: the same on every platform).
std::vector<ValidationPrompt> random_prompts(int64_t count, int64_t length, int64_t vocab,
                                             uint64_t seed);

// The whole file; Error naming it when it cannot be read or is empty.
std::string read_text_file(const std::string& path);

// The committed presets (data/validate/ under `data_dir`): prompts.jsonl and the text.
std::string preset_prompts_path(const std::string& data_dir);
std::string preset_text_path(const std::string& data_dir);

}  // namespace deepinfer::validate
