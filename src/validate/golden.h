#pragma once
// Reference outputs written by tools/dump_reference.py (transformers, float32): per prompt the
// token ids, the next-token logits of every position and the outputs of every block (the names
// of model::ForwardObserver), arrays stored as base64 of little-endian float32.
#include <cstdint>
#include <string>
#include <vector>

#include "validate/probe.h"

namespace deepinfer::validate {

struct GoldenPrompt {
  std::string name;
  std::vector<int32_t> ids;
  std::vector<float> logits;                // [ids.size(), vocab]
  std::vector<LayerCapture::Entry> blocks;  // [ids.size(), hidden] each, in forward order
};

struct Golden {
  std::string path;
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t hidden_size = 0;
  std::vector<GoldenPrompt> prompts;
};

// Throws Error naming the file and the field for a missing file, a bad format or sizes that do
// not add up.
Golden read_golden(const std::string& path);

// RFC 4648 base64 (with padding) -> bytes; Error on anything else (core/base64.h).
std::vector<uint8_t> decode_base64(const std::string& text);

}  // namespace deepinfer::validate
