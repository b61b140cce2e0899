// Fuzzes the Hugging Face config readers: arbitrary bytes as config.json go through
// io::ModelConfig::parse, and the same bytes as generation_config.json through
// io::GenerationConfig::parse (over the model config when that parsed, else an empty one).
// deepinfer::Error (malformed JSON, a bad key) is the expected outcome for garbage; any other
// exception, a crash, a hang or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_file.h"
#include "io/hf_config.h"

using deepinfer::io::GenerationConfig;
using deepinfer::io::ModelConfig;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json json;
  try {
    json = deepinfer::parse_json_text(text, "config.json");
  } catch (const deepinfer::Error&) {
    return 0;
  }
  ModelConfig model;
  try {
    model = ModelConfig::parse(json, "config.json");
    // What the loader promises every family builder.
    if (model.vocab_size < 1 || model.hidden_size < 1 || model.num_hidden_layers < 1 ||
        model.num_attention_heads < 1 || model.head_dim < 1 || model.num_key_value_heads < 1 ||
        model.num_attention_heads % model.num_key_value_heads != 0) {
      std::abort();
    }
  } catch (const deepinfer::Error&) {
  }
  try {
    GenerationConfig::parse(json, "generation_config.json", model);
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
