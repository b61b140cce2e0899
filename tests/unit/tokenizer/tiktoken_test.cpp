// tiktoken.model (Kimi): the rank file, its errors, the pat_str read from the tokenizer module,
// the Oniguruma constructs of Kimi's regex, and the special tokens of a Kimi-style directory.
// The ids of the goldens corpus are in tokenizer_golden_test.cpp (Tiktoken/TokenizerGolden).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/tiktoken_config.h"
#include "tokenizer/tiktoken_model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

const std::string kKimiDir = std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizer/tiktoken_kimi";

// The first ranks of a byte-level vocabulary: every byte, then "ab", "abc", "bc".
std::string small_rank_file() {
  std::string text;
  const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto b64 = [&](const std::string& bytes) {
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
      uint32_t v = 0;
      const size_t n = std::min<size_t>(3, bytes.size() - i);
      for (size_t k = 0; k < 3; ++k) {
        v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0);
      }
      for (size_t k = 0; k < 4; ++k) out += k <= n ? digits[(v >> (18 - 6 * k)) & 63] : '=';
    }
    return out;
  };
  int rank = 0;
  for (int b = 0; b < 256; ++b)
    text += b64(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
  for (const char* token : {"ab", "bc", "abc"})
    text += b64(token) + " " + std::to_string(rank++) + "\n";
  return text;
}

class TiktokenFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("tiktoken_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  // Loading the directory fails with one message holding every fragment.
  void expect_error(std::initializer_list<std::string> fragments) {
    try {
      Tokenizer::load_dir(dir_.string());
      ADD_FAILURE() << "loaded without error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      for (const auto& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << what;
    }
  }
  std::string model_path() const { return (dir_ / "tiktoken.model").string(); }
  std::filesystem::path dir_;
};

TEST_F(TiktokenFiles, LoadsAByteLevelBpe) {
  write("tiktoken.model", small_rank_file());
  const Tokenizer tok = Tokenizer::load_dir(dir_.string());
  EXPECT_EQ(tok.vocab_size(), 259);
  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok.encode("abcd", false), (std::vector<int32_t>{258, 'd'}));
  EXPECT_EQ(tok.encode("xbc ab", false), (std::vector<int32_t>{'x', 257, ' ', 256}));
  EXPECT_EQ(tok.decode(tok.encode("\xff\xfe bytes", false), false),
            "\xef\xbf\xbd\xef\xbf\xbd bytes");
}

TEST_F(TiktokenFiles, RanksInAnyOrderAndBlankLines) {
  const std::string good = small_rank_file();
  write("tiktoken.model", "\n" + good.substr(good.find('\n') + 1) + "AA== 0\r\n\n");
  const Tokenizer tok = Tokenizer::load_dir(dir_.string());
  EXPECT_EQ(tok.encode(std::string(1, '\0') + "abc", false), (std::vector<int32_t>{0, 258}));
}

TEST_F(TiktokenFiles, CorruptFilesNameFileLineAndProblem) {
  const std::string good = small_rank_file();  // line 2 is "AQ== 1"
  const auto with_line2 = [&](const std::string& line) {
    const size_t start = good.find('\n') + 1;
    return good.substr(0, start) + line + good.substr(good.find('\n', start));
  };
  write("tiktoken.model", with_line2("A*== 1"));
  expect_error({model_path(), "line 2", "'A*=='", "not valid base64"});
  write("tiktoken.model", with_line2("AQ= 1"));
  expect_error({model_path(), "line 2", "not valid base64"});
  write("tiktoken.model", with_line2("AQ== one"));
  expect_error({model_path(), "line 2", "rank 'one'", "not an integer"});
  write("tiktoken.model", with_line2("AQ== -1"));
  expect_error({model_path(), "line 2", "rank '-1'"});
  write("tiktoken.model", with_line2("AQ== 1.5"));
  expect_error({model_path(), "line 2", "rank '1.5'"});
  write("tiktoken.model", with_line2("AQ== 1 extra"));
  expect_error({model_path(), "line 2", "expected '<base64 token> <rank>'", "3 fields"});
  write("tiktoken.model", with_line2("AQ=="));
  expect_error({model_path(), "line 2", "1 fields"});
  write("tiktoken.model", with_line2("AQ== 0"));
  expect_error({model_path(), "line 2", "rank 0 is already given on line 1"});
  write("tiktoken.model", with_line2("AA== 1"));
  expect_error({model_path(), "line 2", "the same token as line 1"});
  write("tiktoken.model", with_line2("AQ== 259"));
  expect_error({model_path(), "line 2", "rank 259 is past the end", "ranks 0..258"});
  write("tiktoken.model", with_line2("AQ== 99999999999"));
  expect_error({model_path(), "line 2", "rank '99999999999'"});
  write("tiktoken.model", "\n\n");
  expect_error({model_path(), "no tokens"});
}

TEST_F(TiktokenFiles, MissingFiles) {
  expect_error({dir_.string(), "no tokenizer.json or tiktoken.model"});
  try {
    Tokenizer::load_tiktoken(model_path(), {}, std::string(kTiktokenDefaultPattern));
    ADD_FAILURE() << "loaded without error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(model_path() + ": tokenizer file not found"),
              std::string::npos)
        << e.what();
  }
  // auto_map names a tokenizer module: its pat_str is needed, no regex is guessed.
  write("tiktoken.model", small_rank_file());
  write("tokenizer_config.json",
        R"({"auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", null]}})");
  expect_error({"tokenizer_config.json", "tokenization_kimi.py", "not in"});
  write("tokenization_kimi.py", "class TikTokenTokenizer:\n    pass\n");
  expect_error({"tokenization_kimi.py: no pat_str"});
}

TEST_F(TiktokenFiles, AddedTokensDecoder) {
  write("tiktoken.model", small_rank_file());
  write("tokenizer_config.json", R"({"bos_token": "[BOS]", "eos_token": "[EOS]",
    "added_tokens_decoder": {"259": {"content": "[BOS]", "special": true},
                             "262": {"content": "[EOS]", "special": true},
                             "263": "<plain>"}})");
  const Tokenizer tok = Tokenizer::load_dir(dir_.string());
  EXPECT_EQ(tok.vocab_size(), 264);
  EXPECT_EQ(tok.bos_id(), 259);
  EXPECT_EQ(tok.eos_id(), 262);
  EXPECT_EQ(tok.id_to_token(260), "<|reserved_token_260|>");
  EXPECT_TRUE(tok.is_special(261));
  EXPECT_EQ(tok.encode("[BOS]ab<|reserved_token_261|><plain>", false),
            (std::vector<int32_t>{259, 256, 261, 263}));
  write("tokenizer_config.json", R"({"added_tokens_decoder": {"12": {"content": "x"}}})");
  expect_error(
      {"tokenizer_config.json", "added_tokens_decoder[12]", "one of tiktoken.model's ranks"});
  write("tokenizer_config.json", R"({"added_tokens_decoder": {"x1": {"content": "x"}}})");
  expect_error({"tokenizer_config.json", "key 'x1'"});
}

TEST(TiktokenPattern, ReadsPatStrAsPythonWritesIt) {
  EXPECT_EQ(python_pat_str("x = 1\npat_str = r\"a\\p{L}+\"\n", "m.py"), "a\\p{L}+");
  EXPECT_EQ(
      python_pat_str("    pat_str: str = \"|\".join(\n        [\n            "
                     "r\"\"\"[\\p{Han}]+\"\"\",  # Han\n"
                     "            r'''\\s+(?!\\S)''',\n            \"\\\\s+\",\n        ]\n    )\n",
                     "m.py"),
      "[\\p{Han}]+|\\s+(?!\\S)|\\s+");
  EXPECT_EQ(python_pat_str("pat_str = (r\"a\" r'b' \"c\\n\")", "m.py"), "abc\n");
  EXPECT_EQ(python_pat_str("self.pat_str = 1\nmy_pat_str = 2\nif pat_str == x: pass\n", "m.py"),
            std::nullopt);
  EXPECT_THROW(python_pat_str("pat_str = build_pattern()", "m.py"), Error);
  EXPECT_THROW(python_pat_str("pat_str = \"unterminated\n", "m.py"), Error);
}

TEST(TiktokenPattern, DefaultWithoutATokenizerModule) {
  EXPECT_EQ(tiktoken_pattern("/nonexistent", TokenizerConfig{}, "tokenizer_config.json"),
            kTiktokenDefaultPattern);
}

std::vector<std::string> pieces(const std::string& pattern, const std::string& text) {
  std::vector<Match> matches;
  Regex::compile(pattern, "test")->find_all(text, matches);
  std::vector<std::string> out;
  for (const auto& [b, e] : matches) out.push_back(text.substr(b, e - b));
  return out;
}

TEST(TiktokenRegex, HanIsTheScriptProperty) {
  // Oniguruma's \p{Han} is Script=Han: 〇 and 々 are in it, the shared 、 and 。 are not.
  EXPECT_EQ(translate_pattern("[\\p{Han}]+\\P{Han}\\p{^Han}\\p{Lu}"),
            "[\\p{sc:Han}]+\\P{sc:Han}\\P{sc:Han}\\p{Lu}");
  EXPECT_EQ(pieces("[\\p{Han}]+", "漢字、〇々。"), (std::vector<std::string>{"漢字", "〇々"}));
}

TEST(TiktokenRegex, ClassIntersectionsAndNestedClasses) {
  EXPECT_EQ(translate_pattern("[\\p{Lu}\\p{Lo}&&[^\\p{Han}]]"),
            "(?:(?=[^\\p{sc:Han}])[\\p{Lu}\\p{Lo}])");
  EXPECT_EQ(pieces("[a-z&&[^aeiou]]+", "hello world"),
            (std::vector<std::string>{"h", "ll", "w", "rld"}));
  EXPECT_EQ(pieces("[a[0-9]]+", "ab12-c"), (std::vector<std::string>{"a", "12"}));
  EXPECT_EQ(pieces("[^a-c&&[b-d]]+", "abcdx"), (std::vector<std::string>{"a", "dx"}));
  EXPECT_EQ(pieces("[\\p{Lo}&&[^\\p{Han}]]+", "かな漢字カナ"),
            (std::vector<std::string>{"かな", "カナ"}));
  // Case-insensitive contractions, as (?i:'s|...) in Kimi's pattern.
  EXPECT_EQ(pieces("(?i:'s|'ll)", "IT'S we'LL"), (std::vector<std::string>{"'S", "'LL"}));
}

TEST(TiktokenKimi, SpecialTokens) {
  const Tokenizer tok = Tokenizer::load_dir(kKimiDir);
  ASSERT_EQ(tok.token_to_id("[BOS]"), 7000);
  EXPECT_EQ(tok.bos_id(), 7000);
  EXPECT_EQ(tok.eos_id(), 7001);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 7002);
  EXPECT_EQ(tok.token_to_id("[PAD]"), 7255);
  EXPECT_EQ(tok.vocab_size(), 7256);
  EXPECT_EQ(tok.id_to_token(7005), "<|reserved_token_7005|>");
  EXPECT_TRUE(tok.is_special(7005));
  EXPECT_FALSE(tok.is_special(100));
  const std::string chat = "<|im_user|>user<|im_middle|>你好<|im_end|>";
  const auto ids = tok.encode(chat, /*add_special_tokens=*/true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 7003);  // no BOS is added: the template carries the specials
  EXPECT_EQ(ids.back(), 7002);
  EXPECT_EQ(tok.decode(ids, false), chat);
  EXPECT_EQ(tok.decode(ids, true), "user你好");
}

TEST(TiktokenKimi, DecodeRoundTrip) {
  const Tokenizer tok = Tokenizer::load_dir(kKimiDir);
  for (const std::string text :
       {"Hello, World! It's 2026.", "日本語と中文、한국어 😀", "  spaces\n\n\ttabs\r\n",
        "DON'T SHOUT: THEY'LL HEAR", "[EOT] special [BOS]", "x = f(a[1], b)  # code"}) {
    EXPECT_EQ(tok.decode(tok.encode(text, false), false), text);
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer
