#pragma once
// tokenizer.json "decoder": turns token strings back into text. Each decoder works on the
// whole token list (decode_chain in `tokenizers`); the results are concatenated.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Supported: ByteLevel, Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace, WordPiece,
// BPEDecoder. Anything else throws Error naming the type and source. nullptr for JSON null
// (tokens are then joined with spaces, as `tokenizers` does).
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& json, const std::string& source);

// True when the decoder is exactly ByteLevel (the tokenizer then decodes without the chain).
bool is_plain_byte_level(const nlohmann::json& json);

}  // namespace deepinfer::tokenizer
