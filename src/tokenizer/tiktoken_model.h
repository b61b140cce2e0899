#pragma once
// tiktoken.model (Kimi-K2, Kimi-K2.5): one line per token, the base64 of its bytes, a space and
// its rank. transformers runs it as a byte-level BPE (convert_slow_tokenizer.TikTokenConverter):
// the rank is the token id, every split of a token into two ranked tokens is a merge, and the
// merges rank by the token they make. This turns the file into the parts a tokenizer.json
// gives (TokenizerJson), so the one BPE implementation runs it.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_json.h"

namespace deepinfer::tokenizer {

// TikTokenConverter's default pre-tokenization regex (cl100k_base's), for files whose model
// directory names no tokenizer class with its own pat_str.
inline constexpr std::string_view kTiktokenDefaultPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The token bytes of each rank, ranks[r] for rank r. Blank lines are skipped, as tiktoken
// does. Throws Error "<source>: line N: <problem>" when a line is not "<base64> <rank>", the
// base64 is malformed, the rank is not a non-negative integer, a rank or a token appears
// twice, or the ranks are not 0..n-1.
std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::string& source);

// The tokenizer.json parts of TikTokenConverter(pattern=pattern).converted(): a BPE model with
// ignore_merges, Split(pattern) + ByteLevel pre-tokenizer, ByteLevel decoder, and
// `added_tokens` (tokenizer.json's "added_tokens" array).
TokenizerJson tiktoken_tokenizer_json(const std::vector<std::string>& ranks,
                                      std::string_view pattern, nlohmann::json added_tokens);

}  // namespace deepinfer::tokenizer
