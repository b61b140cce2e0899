// Goldens from the Python `tokenizers` package (tools/make_tokenizer_goldens.py, and
// tools/make_tiktoken_goldens.py for transformers' conversion of a tiktoken.model): every
// corpus string encoded with and without special tokens, decoded with and without
// skip_special_tokens, streamed id by id, plus invalid UTF-8 inputs and random id lists.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::json;

std::string hex_to_bytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

struct Golden {
  json doc;
  std::unique_ptr<Tokenizer> tok;  // null: the tokenizer file is not available
  std::string skip_reason;
};

// Loads each golden and its tokenizer once for all tests of this file.
Golden& golden(const std::string& name) {
  static std::map<std::string, Golden> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Golden g;
  g.doc =
      read_json_file(std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizer/goldens/" + name + ".json");
  const std::string source = g.doc["tokenizer"];
  std::filesystem::path dir;
  if (source.rfind("shared:", 0) == 0) {
    dir = std::filesystem::path(DEEPINFER_SHARED_DIR) / source.substr(7);
  } else {
    dir = std::filesystem::path(DEEPINFER_TEST_DATA_DIR) /
          std::filesystem::path(source).lexically_relative("tests/data");
  }
  if (std::filesystem::exists(dir / "tiktoken.model")) {
    g.tok = std::make_unique<Tokenizer>(Tokenizer::load_dir(dir.string()));
  } else if (!std::filesystem::exists(dir / "tokenizer.json")) {
    g.skip_reason = (dir / "tokenizer.json").string() + " not available";
  } else if (std::filesystem::exists(dir / "tokenizer_config.json")) {
    g.tok = std::make_unique<Tokenizer>(Tokenizer::load_dir(dir.string()));
  } else {
    g.tok = std::make_unique<Tokenizer>(Tokenizer::load((dir / "tokenizer.json").string()));
  }
  return cache.emplace(name, std::move(g)).first->second;
}

class TokenizerGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    g_ = &golden(GetParam());
    if (!g_->tok) GTEST_SKIP() << g_->skip_reason;
  }
  Golden* g_ = nullptr;
};

TEST_P(TokenizerGolden, EncodesCorpusExactly) {
  const auto prefix = g_->doc["special_prefix"].get<std::vector<int32_t>>();
  const auto suffix = g_->doc["special_suffix"].get<std::vector<int32_t>>();
  int failures = 0, cases = 0;
  for (const auto& c : g_->doc["cases"]) {
    ++cases;
    const std::string text = c["text"];
    const auto expected = c["ids"].get<std::vector<int32_t>>();
    const auto got = g_->tok->encode(text, false);
    auto full = prefix;
    full.insert(full.end(), expected.begin(), expected.end());
    full.insert(full.end(), suffix.begin(), suffix.end());
    const auto got_full = g_->tok->encode(text, true);
    if (got != expected || got_full != full) {
      if (++failures <= 5) {
        ADD_FAILURE() << "text " << json(text).dump() << "\n expected " << show(expected)
                      << "\n got      " << show(got) << "\n with specials " << show(got_full);
      }
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases << " corpus strings";
  EXPECT_GE(cases, 200);
}

TEST_P(TokenizerGolden, DecodesLikeTheReference) {
  const auto prefix = g_->doc["special_prefix"].get<std::vector<int32_t>>();
  const auto suffix = g_->doc["special_suffix"].get<std::vector<int32_t>>();
  int failures = 0;
  for (const auto& c : g_->doc["cases"]) {
    const std::string text = c["text"];
    auto full = prefix;
    for (const auto& id : c["ids"]) full.push_back(id.get<int32_t>());
    full.insert(full.end(), suffix.begin(), suffix.end());
    for (const bool skip : {false, true}) {
      const auto& want = c[skip ? "decoded_skip" : "decoded"];
      const std::string expected = want.is_null() ? text : want.get<std::string>();
      const std::string got = g_->tok->decode(full, skip);
      if (got != expected && ++failures <= 5) {
        ADD_FAILURE() << "skip=" << skip << " ids " << show(full) << "\n expected "
                      << json(expected).dump() << "\n got      " << json(got).dump();
      }
    }
  }
  for (const auto& d : g_->doc["decodes"]) {
    const auto ids = d["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(g_->tok->decode(ids, false), d["decoded"].get<std::string>()) << show(ids);
    EXPECT_EQ(g_->tok->decode(ids, true), d["decoded_skip"].get<std::string>()) << show(ids);
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerGolden, RepairsInvalidUtf8LikePython) {
  for (const auto& c : g_->doc["invalid_utf8"]) {
    const std::string bytes = hex_to_bytes(c["bytes_hex"]);
    EXPECT_EQ(unicode::to_valid_utf8(bytes), c["repaired"].get<std::string>()) << c["bytes_hex"];
    EXPECT_EQ(g_->tok->encode(bytes, false), c["ids"].get<std::vector<int32_t>>())
        << c["bytes_hex"];
  }
}

// Pushing ids one by one never yields a broken character and adds up to the full decode.
TEST_P(TokenizerGolden, StreamsEveryCorpusString) {
  const auto prefix = g_->doc["special_prefix"].get<std::vector<int32_t>>();
  int failures = 0;
  auto check = [&](const std::vector<int32_t>& ids, bool skip) {
    StreamingDetokenizer stream(*g_->tok, skip);
    std::string all;
    for (const int32_t id : ids) {
      const std::string piece = stream.push(id);
      if (!unicode::is_valid_utf8(piece) && ++failures <= 5) {
        ADD_FAILURE() << "invalid UTF-8 piece after id " << id << " in " << show(ids);
      }
      all += piece;
    }
    all += stream.flush();
    if (all != g_->tok->decode(ids, skip) && ++failures <= 5) {
      ADD_FAILURE() << "streamed " << json(all).dump() << " != decoded "
                    << json(g_->tok->decode(ids, skip)).dump();
    }
  };
  for (const auto& c : g_->doc["cases"]) {
    auto full = prefix;
    for (const auto& id : c["ids"]) full.push_back(id.get<int32_t>());
    check(full, false);
    check(full, true);
  }
  for (const auto& d : g_->doc["decodes"]) {
    check(d["ids"].get<std::vector<int32_t>>(), false);
    check(d["ids"].get<std::vector<int32_t>>(), true);
  }
  EXPECT_EQ(failures, 0);
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerGolden,
                         ::testing::Values("tiny", "qwen3", "deepseek-v3", "synthetic_spm_bpe",
                                           "synthetic_metaspace", "synthetic_bytelevel",
                                           "synthetic_whitespace"),
                         param_name);
// A Kimi-style tiktoken.model with Kimi's pat_str (tests/data/tokenizer/tiktoken_kimi).
INSTANTIATE_TEST_SUITE_P(Tiktoken, TokenizerGolden, ::testing::Values("tiktoken_kimi"), param_name);

}  // namespace
}  // namespace deepinfer::tokenizer
