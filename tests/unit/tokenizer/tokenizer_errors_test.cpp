// Malformed tokenizer.json files: each gives one Error naming the file and the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::json;

class TokenizerErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("tok_errors_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static json valid() {
    return {{"version", "1.0"},
            {"added_tokens", json::array()},
            {"normalizer", nullptr},
            {"pre_tokenizer", nullptr},
            {"post_processor", nullptr},
            {"decoder", nullptr},
            {"model",
             {{"type", "BPE"},
              {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}},
              {"merges", json::array({"a b"})}}}};
  }
  std::string write(const std::string& text) {
    const auto path = (dir_ / "tokenizer.json").string();
    std::ofstream(path) << text;
    return path;
  }
  // Loading must fail with a message containing the file path and every fragment.
  void expect_error(const std::string& text, std::initializer_list<std::string> fragments) {
    const std::string path = write(text);
    try {
      Tokenizer::load(path);
      ADD_FAILURE() << "loaded without error: " << text.substr(0, 200);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      for (const auto& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << what;
    }
  }
  std::filesystem::path dir_;
};

TEST_F(TokenizerErrors, ValidFileLoads) {
  const auto tok = Tokenizer::load(write(valid().dump()));
  EXPECT_EQ(tok.encode("abab", false), (std::vector<int32_t>{2, 2}));
}

TEST_F(TokenizerErrors, BadJson) {
  const std::string text = valid().dump();
  expect_error(text.substr(0, text.size() / 2), {"malformed JSON"});
  expect_error("", {"malformed JSON"});
  expect_error("[1, 2]", {"object"});
}

TEST_F(TokenizerErrors, UnknownModelType) {
  json doc = valid();
  doc["model"]["type"] = "Unigram";
  expect_error(doc.dump(), {"unsupported model type 'Unigram'"});
  doc.erase("model");
  expect_error(doc.dump(), {"model"});
}

TEST_F(TokenizerErrors, UnsupportedComponents) {
  json doc = valid();
  doc["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  expect_error(doc.dump(), {"normalizer type 'Precompiled'"});
  doc = valid();
  doc["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "UnicodeScripts"}}}}};
  expect_error(doc.dump(), {"pre_tokenizer type 'UnicodeScripts'"});
  doc = valid();
  doc["decoder"] = {{"type", "CTC"}};
  expect_error(doc.dump(), {"decoder type 'CTC'"});
  doc = valid();
  doc["post_processor"] = {{"type", "Mystery"}};
  expect_error(doc.dump(), {"post_processor type 'Mystery'"});
  doc = valid();
  doc["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}};
  expect_error(doc.dump(), {"cannot compile regex '(a'"});
}

TEST_F(TokenizerErrors, MergesReferencingUnknownTokens) {
  json doc = valid();
  doc["model"]["merges"] = json::array({"a b", "a zz"});
  expect_error(doc.dump(), {"model.merges[1]", "'zz'"});
  doc["model"]["merges"] = json::array({json::array({"b", "a"})});  // "ba" is not in the vocab
  expect_error(doc.dump(), {"model.merges[0]", "'ba'"});
  doc["model"]["merges"] = json::array({"a b c"});
  expect_error(doc.dump(), {"model.merges[0]"});
}

TEST_F(TokenizerErrors, BadVocabAndAddedTokens) {
  json doc = valid();
  doc["model"]["vocab"]["c"] = "three";
  expect_error(doc.dump(), {"model.vocab"});
  doc = valid();
  doc["model"].erase("vocab");
  expect_error(doc.dump(), {"model.vocab"});
  doc = valid();
  doc["added_tokens"] = {{{"content", "<x>"}, {"special", true}}};
  expect_error(doc.dump(), {"added_tokens[0]", "id"});
}

TEST_F(TokenizerErrors, MissingFiles) {
  try {
    Tokenizer::load((dir_ / "nope.json").string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.json"), std::string::npos);
  }
  try {
    Tokenizer::load_dir(dir_.string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer
