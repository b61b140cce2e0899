#include "tokenizer/tiktoken_model.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "core/base64.h"
#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"

namespace deepinfer::tokenizer {
namespace {

struct RankLine {
  std::string token;
  int64_t rank;
  size_t line;
};

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    const size_t start = pos;
    while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
    if (pos > start) fields.push_back(line.substr(start, pos - start));
  }
  return fields;
}

// A rank: decimal digits below kMaxTokenId, else -1.
int64_t parse_rank(std::string_view text) {
  if (text.empty() || text.size() > 9) return -1;
  int64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value < kMaxTokenId ? value : -1;
}

std::vector<RankLine> read_lines(std::string_view text, const std::string& source) {
  std::vector<RankLine> lines;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    const auto fields = fields_of(line);
    if (fields.empty()) continue;
    const std::string where = str_cat(source, ": line ", line_no, ": ");
    DI_CHECK(fields.size() == 2, where, "expected '<base64 token> <rank>', got ", fields.size(),
             " fields");
    RankLine entry{std::string(), parse_rank(fields[1]), line_no};
    DI_CHECK(decode_base64(fields[0], entry.token), where, "'", fields[0], "' is not valid base64");
    DI_CHECK(!entry.token.empty(), where, "empty token");
    DI_CHECK(entry.rank >= 0, where, "rank '", fields[1], "' is not an integer in 0..",
             kMaxTokenId - 1);
    lines.push_back(std::move(entry));
  }
  return lines;
}

std::string byte_level_text(std::string_view bytes) {
  std::string out;
  byte_level::encode(bytes, out);
  return out;
}

}  // namespace

std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::string& source) {
  std::vector<RankLine> lines = read_lines(text, source);
  DI_CHECK(!lines.empty(), source, ": no tokens (expected one '<base64 token> <rank>' per line)");
  const size_t count = lines.size();
  std::vector<size_t> line_of_rank(count, 0);
  std::unordered_map<std::string_view, size_t> line_of_token;
  line_of_token.reserve(count);
  for (const RankLine& entry : lines) {
    const std::string where = str_cat(source, ": line ", entry.line, ": ");
    const auto rank = static_cast<size_t>(entry.rank);
    DI_CHECK(rank < count, where, "rank ", rank, " is past the end: ", count,
             " tokens need ranks 0..", count - 1, " (a rank is missing or skipped)");
    DI_CHECK(line_of_rank[rank] == 0, where, "rank ", rank, " is already given on line ",
             line_of_rank[rank]);
    line_of_rank[rank] = entry.line;
    const auto [it, inserted] = line_of_token.emplace(entry.token, entry.line);
    DI_CHECK(inserted, where, "the same token as line ", it->second);
  }
  // Every rank is below `count` and none repeats: they are exactly 0..count-1.
  std::vector<std::string> ranks(count);
  for (RankLine& entry : lines) ranks[static_cast<size_t>(entry.rank)] = std::move(entry.token);
  return ranks;
}

TokenizerJson tiktoken_tokenizer_json(const std::vector<std::string>& ranks,
                                      std::string_view pattern, nlohmann::json added_tokens) {
  TokenizerJson out;
  out.has_vocab = out.has_merges = true;
  std::unordered_map<std::string_view, int32_t> rank_of;
  rank_of.reserve(ranks.size());
  out.vocab.reserve(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    rank_of.emplace(ranks[r], static_cast<int32_t>(r));
    out.vocab.emplace_back(byte_level_text(ranks[r]), static_cast<int64_t>(r));
  }
  // As extract_vocab_merges_from_model: token by token in rank order, its splits ordered by
  // the ranks of the left part, then the right part.
  struct Split {
    int32_t left, right;
  };
  std::vector<Split> splits;
  for (const std::string& token : ranks) {
    splits.clear();
    const std::string_view bytes = token;
    for (size_t k = 1; k < bytes.size(); ++k) {
      const auto left = rank_of.find(bytes.substr(0, k));
      if (left == rank_of.end()) continue;
      const auto right = rank_of.find(bytes.substr(k));
      if (right != rank_of.end()) splits.push_back({left->second, right->second});
    }
    std::sort(splits.begin(), splits.end(), [](const Split& a, const Split& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    for (const Split& split : splits) {
      out.merges.emplace_back(out.vocab[static_cast<size_t>(split.left)].first,
                              out.vocab[static_cast<size_t>(split.right)].first);
    }
  }
  using nlohmann::json;
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  out.doc = {{"added_tokens", std::move(added_tokens)},
             {"normalizer", nullptr},
             {"pre_tokenizer",
              {{"type", "Sequence"},
               {"pretokenizers", json::array({{{"type", "Split"},
                                               {"pattern", {{"Regex", std::string(pattern)}}},
                                               {"behavior", "Isolated"},
                                               {"invert", false}},
                                              byte_level})}}},
             {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
             {"decoder", {{"type", "ByteLevel"}}},
             {"model", {{"type", "BPE"}, {"fuse_unk", false}, {"ignore_merges", true}}}};
  return out;
}

}  // namespace deepinfer::tokenizer
