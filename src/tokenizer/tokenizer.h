#pragma once
// A Hugging Face tokenizer.json tokenizer (BPE family) in C++: the same ids as the Python
// `tokenizers` package, with add_special_tokens behaving as transformers' AutoTokenizer.
// A tiktoken.model (Kimi) loads as the tokenizer.json that transformers converts it to.
//
// Pipeline of encode(): invalid UTF-8 repaired -> added tokens split out -> normalizer ->
// normalized added tokens -> pre-tokenizer -> BPE per word -> post-processor (specials).
// All methods are const and thread-safe; one Tokenizer is shared by every request.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/text_budget.h"
#include "tokenizer/tokenizer_config.h"

namespace deepinfer::tokenizer {

struct TokenizerJson;  // tokenizer/tokenizer_json.h

class Tokenizer {
 public:
  // Loads tokenizer.json; `config` (tokenizer_config.json) supplies bos/eos strings and the
  // transformers rules for add_bos_token / add_eos_token. Throws Error naming the file.
  static Tokenizer load(const std::string& tokenizer_json_path, const TokenizerConfig& config = {});
  // Loads tiktoken.model (base64 token, space, rank per line) as transformers'
  // TikTokenConverter does, with `pattern` as the pre-tokenization regex and the added tokens
  // of config's added_tokens_decoder. Throws Error naming the file (and the line).
  static Tokenizer load_tiktoken(const std::string& tiktoken_model_path,
                                 const TokenizerConfig& config, const std::string& pattern);
  // tokenizer.json + tokenizer_config.json of a model directory; without tokenizer.json,
  // tiktoken.model with the pat_str of the tokenizer module that tokenizer_config names.
  static Tokenizer load_dir(const std::string& model_dir);
  // Parses tokenizer.json text already in memory; `source` names it in errors.
  static Tokenizer from_json_text(const std::string& text, const std::string& source,
                                  const TokenizerConfig& config = {});

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Invalid UTF-8 is first decoded lossily (each maximal invalid subsequence -> U+FFFD).
  // Prompts rendered from a chat template already hold their BOS: encode them with
  // add_special_tokens = false.
  //
  // The text the normalizer and pre-tokenizer make stays within a TextBudget (by default
  // TextBudget::for_input(text.size())), else TextBudgetExceeded.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens,
                              TextBudget budget) const;
  // Unknown ids are skipped, as in `tokenizers`.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Empty string for an unknown id.
  std::string id_to_token(int32_t id) const;
  int64_t vocab_size() const;  // max id + 1 over vocab and added tokens
  bool is_special(int32_t id) const;
  const TokenizerConfig& config() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  friend class StreamingDetokenizer;
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // Builds the components of a parsed tokenizer.json (read from a file or made from a
  // tiktoken.model); `source` names it in errors.
  static Tokenizer from_tokenizer_json(TokenizerJson file, const std::string& source,
                                       const TokenizerConfig& config);
  // Whether decoding `window` ends inside a multi-byte character that the next ids could
  // still complete; `fresh` is the suffix of the window not yet returned to the caller.
  bool ends_mid_character(std::span<const int32_t> window, std::span<const int32_t> fresh,
                          bool skip_special_tokens) const;
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenization of one sequence: push() returns only newly completed text,
// never a partial UTF-8 character, and the concatenation of all push() results and flush()
// equals tokenizer.decode(all ids).
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens);
  std::string push(int32_t id);
  std::string flush();  // whatever remains (lossy if incomplete)

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // window start: context for decoders that look back
  size_t read_offset_ = 0;    // text of ids before this has been returned
  std::string prefix_text_;   // decode(ids[prefix_offset_, read_offset_))
};

}  // namespace deepinfer::tokenizer
