#pragma once
// What a tiktoken model directory says besides tiktoken.model: the pre-tokenization regex
// (the pat_str of the remote-code tokenizer class tokenizer_config.json names, e.g. Kimi's
// tokenization_kimi.py) and the added tokens (tokenizer_config.json's added_tokens_decoder).
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_config.h"

namespace deepinfer::tokenizer {

// The pat_str of the Python module that auto_map.AutoTokenizer names
// ("tokenization_kimi.TikTokenTokenizer" -> model_dir/tokenization_kimi.py); without an
// auto_map, TikTokenConverter's default. Throws Error when the module is missing or its
// pat_str cannot be read: a guessed regex would give other ids.
std::string tiktoken_pattern(const std::string& model_dir, const TokenizerConfig& config,
                             const std::string& config_source);

// The value of `pat_str = ...` in Python source: a string literal or "|".join([...]) of
// string literals (raw or plain; adjacent literals concatenate). nullopt when no line assigns
// pat_str; Error naming `source` for a value of another form.
std::optional<std::string> python_pat_str(std::string_view code, const std::string& source);

// tokenizer.json "added_tokens" from added_tokens_decoder ({"163584": {"content": "[BOS]",
// "special": true, ...}}), as transformers' tiktoken conversion makes them: the ids between
// the last rank and the largest declared id that the config leaves out become special
// "<|reserved_token_ID|>". Ids inside the ranks are refused.
nlohmann::json tiktoken_added_tokens(const TokenizerConfig& config, size_t num_ranks,
                                     const std::string& config_source);

}  // namespace deepinfer::tokenizer
