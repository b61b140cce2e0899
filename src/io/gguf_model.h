#pragma once
// A llama.cpp GGUF file read as a whole Hugging Face model: config.json, tokenizer.json,
// tokenizer_config.json and the checkpoint's tensors, all derived from the one file, so that
// `--model model.gguf` goes through the same loaders as a checkpoint directory.
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/gguf.h"

namespace deepinfer::io {

// The GGUF file `path` names: the path itself when it is a file ending in .gguf, or the one
// .gguf file in a directory that has no config.json (Error when it holds several). nullopt
// for anything else (a checkpoint directory, a missing path).
std::optional<std::string> gguf_model_file(const std::string& path);

// The config.json that transformers would write for the model in `file` (architectures,
// sizes, rope, MoE / MLA keys), from llama.cpp's `<arch>.*` metadata. Error naming the key
// for a missing or contradictory value and for an architecture we do not map.
nlohmann::json gguf_config_json(const GgufFile& file);

// generation_config.json from general.sampling.* (the converter's copy of the original's
// sampling defaults) and the end-of-generation tokens (eos, eot, eom), as llama.cpp stops on.
nlohmann::json gguf_generation_config_json(const GgufFile& file);

// tokenizer.json / tokenizer_config.json equivalents from `tokenizer.ggml.*` and
// `tokenizer.chat_template`; nullopt when the file carries no vocabulary.
struct GgufTokenizerFiles {
  nlohmann::json tokenizer;         // tokenizer.json
  nlohmann::json tokenizer_config;  // tokenizer_config.json (chat_template, special tokens)
};
std::optional<GgufTokenizerFiles> gguf_tokenizer_files(const GgufFile& file);

}  // namespace deepinfer::io
