// Tokenizer API, the BPE merge loop against a naive reference, added-token matching rules
// (the cases of tokenizers' own added_vocabulary tests), streaming, and huge single words.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::json;

const std::string kTiny = std::string(DEEPINFER_TEST_DATA_DIR) + "/tiny-qwen3";
const std::string kShared = std::string(DEEPINFER_SHARED_DIR) + "/tokenizers";

// A BPE tokenizer over single characters with the given merges (in rank order).
json char_bpe(const std::string& alphabet,
              const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  size_t pos = 0;
  while (pos < alphabet.size()) {
    const size_t start = pos;
    unicode::next_code_point(alphabet, pos);
    vocab[alphabet.substr(start, pos - start)] = static_cast<int>(vocab.size());
  }
  json merge_list = json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = static_cast<int>(vocab.size());
    merge_list.push_back({a, b});
  }
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

Tokenizer from(const json& doc) {
  return Tokenizer::from_json_text(doc.dump(), "test.json");
}

// The textbook BPE: repeatedly merge the lowest-ranked adjacent pair, leftmost first.
std::vector<std::string> naive_bpe(const std::string& word,
                                   const std::map<std::pair<std::string, std::string>, int>& rank) {
  std::vector<std::string> syms;
  for (char c : word) syms.emplace_back(1, c);
  while (syms.size() > 1) {
    int best_rank = -1;
    size_t best = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const auto it = rank.find({syms[i], syms[i + 1]});
      if (it != rank.end() && (best_rank < 0 || it->second < best_rank)) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank < 0) break;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  return syms;
}

TEST(TokenizerBpe, MatchesNaiveReferenceOnRandomWords) {
  std::mt19937 rng(42);
  const std::string alphabet = "abcd";
  std::vector<std::string> tokens = {"a", "b", "c", "d"};
  std::vector<std::pair<std::string, std::string>> merges;
  std::map<std::pair<std::string, std::string>, int> rank;
  while (merges.size() < 60) {
    const auto& a = tokens[rng() % tokens.size()];
    const auto& b = tokens[rng() % tokens.size()];
    if (rank.count({a, b}) || (a + b).size() > 8) continue;
    rank[{a, b}] = static_cast<int>(merges.size());
    merges.emplace_back(a, b);
    tokens.push_back(a + b);
  }
  const Tokenizer tok = from(char_bpe(alphabet, merges));
#ifdef NDEBUG
  constexpr int kTrials = 400;
#else
  constexpr int kTrials = 100;
#endif
  for (int trial = 0; trial < kTrials; ++trial) {
    // Lengths on both sides of the small-word/heap switch.
    const size_t len = 1 + rng() % (trial % 2 ? 300 : 40);
    std::string word;
    for (size_t i = 0; i < len; ++i) word += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> expected;
    for (const auto& piece : naive_bpe(word, rank)) expected.push_back(*tok.token_to_id(piece));
    ASSERT_EQ(tok.encode(word, false), expected) << word;
  }
}

TEST(TokenizerBpe, ModelOptions) {
  // Unknown characters: fused unk; byte fallback when the <0xXX> tokens exist (a pending
  // unk lands after later byte tokens, as in tokenizers). Values checked with tokenizers.
  json doc = char_bpe("ab", {{"a", "b"}});
  doc["model"]["vocab"]["<unk>"] = 10;
  doc["model"]["unk_token"] = "<unk>";
  doc["model"]["fuse_unk"] = true;
  EXPECT_EQ(from(doc).encode("abxyb", false), (std::vector<int32_t>{2, 10, 1}));
  doc["model"]["fuse_unk"] = false;
  EXPECT_EQ(from(doc).encode("abxyb", false), (std::vector<int32_t>{2, 10, 10, 1}));
  doc["model"]["byte_fallback"] = true;
  doc["model"]["vocab"]["<0x78>"] = 11;  // 'x' only
  EXPECT_EQ(from(doc).encode("xyx", false), (std::vector<int32_t>{11, 11, 10}));
  // Without an unk token unknown characters vanish and their neighbours may merge.
  json plain = char_bpe("ab", {{"a", "b"}});
  EXPECT_EQ(from(plain).encode("axb", false), (std::vector<int32_t>{2}));
  // ignore_merges: a word that is in the vocabulary is taken whole.
  json ignore = char_bpe("abc", {{"b", "c"}, {"a", "bc"}});
  ignore["model"]["vocab"]["ab"] = 20;
  EXPECT_EQ(from(ignore).encode("ab", false), (std::vector<int32_t>{0, 1}));
  ignore["model"]["ignore_merges"] = true;
  EXPECT_EQ(from(ignore).encode("ab", false), (std::vector<int32_t>{20}));
  // continuing_subword_prefix: later characters are looked up as "##x".
  json prefixed = char_bpe("ab", {});
  prefixed["model"]["vocab"] = {{"a", 0}, {"b", 1}, {"##a", 2}, {"##b", 3}, {"ab", 4}};
  prefixed["model"]["merges"] = json::array({json::array({"a", "##b"})});
  prefixed["model"]["continuing_subword_prefix"] = "##";
  EXPECT_EQ(from(prefixed).encode("aba", false), (std::vector<int32_t>{4, 2}));
}

// The cases of tokenizers' added_vocabulary.rs tests, through the whole pipeline.
json added_token(const std::string& content, int id, bool special, bool normalized,
                 bool lstrip = false, bool rstrip = false, bool single_word = false) {
  return {{"id", id},
          {"content", content},
          {"special", special},
          {"normalized", normalized},
          {"lstrip", lstrip},
          {"rstrip", rstrip},
          {"single_word", single_word}};
}

TEST(TokenizerAddedTokens, StripAndSingleWordOptions) {
  json doc = char_bpe(" abcdefghijklmnopqrstuvwxyz\t\u2000<>", {});
  doc["normalizer"] = {{"type", "Lowercase"}};
  doc["added_tokens"] = {
      added_token("my", 100, false, true, true, true), added_token("name", 101, false, true),
      added_token("ony", 102, false, true, false, false, true),
      added_token("[CLS]", 103, true, false), added_token("[SEP]", 104, true, false)};
  const Tokenizer tok = from(doc);
  std::vector<int32_t> expected = {103, 100, 101};
  for (char c : std::string(" is anthony "))
    expected.push_back(*tok.token_to_id(std::string(1, c)));
  expected.push_back(104);
  EXPECT_EQ(tok.encode("[CLS] My name is Anthony [SEP]", false), expected);

  json single = char_bpe(" abcdefghijklmnopqrstuvwxyz\t\u2000<>", {});
  single["normalizer"] = {{"type", "Lowercase"}};
  single["added_tokens"] = {added_token("<mask>", 100, false, true, false, false, true)};
  const Tokenizer mask = from(single);
  const auto chars = [&](const std::string& s) {
    std::vector<int32_t> ids;
    for (size_t pos = 0; pos < s.size();) {
      const size_t start = pos;
      unicode::next_code_point(s, pos);
      ids.push_back(*mask.token_to_id(s.substr(start, pos - start)));
    }
    return ids;
  };
  std::vector<int32_t> want = {100};
  for (int id : chars(" my name ")) want.push_back(id);
  want.push_back(100);
  for (int id : chars(" a<mask> <mask>ony ")) want.push_back(id);
  want.push_back(100);
  EXPECT_EQ(mask.encode("<mask> My name <mask> A<mask> <mask>ony <mask>", false), want);

  single["added_tokens"] = {added_token("<mask>", 100, false, true, true, true, true)};
  const Tokenizer strip = from(single);
  want = chars("hi");
  want.push_back(100);  // " <mask> "
  for (int id : chars("there")) want.push_back(id);
  want.push_back(100);  // "\t<mask>\t"
  want.push_back(100);  // "<mask>\u2000": the tab before it belongs to the previous match
  EXPECT_EQ(strip.encode("Hi <mask> there\t<mask>\t<mask>\u2000", false), want);
}

TEST(TokenizerApi, TinyTokenizerBasics) {
  const Tokenizer tok = Tokenizer::load_dir(kTiny);
  // The tiny tokenizer is regenerated by tools/; take its layout from the file itself.
  const json file = json::parse(std::ifstream(kTiny + "/tokenizer.json"));
  const int32_t n_vocab = static_cast<int32_t>(file["model"]["vocab"].size());
  EXPECT_EQ(tok.vocab_size(), n_vocab + 3);
  const int32_t end_text = n_vocab, im_start = n_vocab + 1, im_end = n_vocab + 2;
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), im_end);
  EXPECT_EQ(tok.id_to_token(im_end), "<|im_end|>");
  EXPECT_EQ(tok.id_to_token(100000), "");
  EXPECT_FALSE(tok.token_to_id("no such token").has_value());
  EXPECT_TRUE(tok.is_special(end_text));
  EXPECT_FALSE(tok.is_special(5));
  EXPECT_EQ(tok.eos_id(), im_end);
  EXPECT_FALSE(tok.bos_id().has_value());
  EXPECT_EQ(tok.config().eos_token, "<|im_end|>");
  EXPECT_TRUE(tok.encode("", true).empty());
  const auto ids = tok.encode("<|im_start|>user\nhi<|im_end|>", false);
  EXPECT_EQ(ids.front(), im_start);
  EXPECT_EQ(ids.back(), im_end);
  EXPECT_EQ(tok.decode(ids, true), "user\nhi");
}

TEST(TokenizerApi, SharedTokenizersBosHandling) {
  if (!std::filesystem::exists(kShared + "/deepseek-v3/tokenizer.json")) {
    GTEST_SKIP() << "shared tokenizers not available";
  }
  const Tokenizer ds = Tokenizer::load_dir(kShared + "/deepseek-v3");
  EXPECT_EQ(ds.bos_id(), 0);
  EXPECT_EQ(ds.eos_id(), 1);
  EXPECT_EQ(ds.encode("Hello world", true), (std::vector<int32_t>{0, 19923, 2058}));
  EXPECT_EQ(ds.encode("Hello world", false), (std::vector<int32_t>{19923, 2058}));
  // A rendered chat prompt carries its BOS: encoded without special tokens it keeps one.
  const auto chat = ds.encode("<\uFF5Cbegin\u2581of\u2581sentence\uFF5C>hi", false);
  EXPECT_EQ(chat.front(), 0);
  EXPECT_NE(chat[1], 0);
  const Tokenizer qwen = Tokenizer::load_dir(kShared + "/qwen3");
  EXPECT_EQ(qwen.vocab_size(), 151669);
  EXPECT_FALSE(qwen.bos_id().has_value());
  EXPECT_EQ(qwen.eos_id(), 151645);
  EXPECT_EQ(qwen.encode("Hello world", true), qwen.encode("Hello world", false));
}

TEST(TokenizerStreaming, HoldsPartialCharacters) {
  const Tokenizer tok = Tokenizer::load_dir(kTiny);
  const auto id = [&](unsigned char b) { return *tok.token_to_id(byte_level::byte_to_utf8()[b]); };
  StreamingDetokenizer s(tok, false);
  EXPECT_EQ(s.push(id('a')), "a");
  EXPECT_EQ(s.push(id(0xE4)), "");
  EXPECT_EQ(s.push(id(0xBD)), "");
  EXPECT_EQ(s.push(id(0xA0)), "\u4F60");
  EXPECT_EQ(s.push(id(0xFF)), "\uFFFD");  // can never complete: released at once
  EXPECT_EQ(s.push(id(0xF0)), "");
  const int32_t end_text = *tok.token_to_id("<|endoftext|>");
  // The token's bytes follow the open sequence, which can then never complete.
  EXPECT_EQ(s.push(end_text), "\uFFFD<|endoftext|>");
  EXPECT_EQ(s.flush(), "");

  StreamingDetokenizer skip(tok, true);
  EXPECT_EQ(skip.push(*tok.token_to_id("<|im_start|>")), "");
  EXPECT_EQ(skip.push(id('x')), "x");
  EXPECT_EQ(skip.push(id(0xE4)), "");
  EXPECT_EQ(skip.push(*tok.token_to_id("<|im_end|>")), "");  // skipped: still open
  EXPECT_EQ(skip.flush(), "\uFFFD");  // lossy when the stream ends mid-character
}

TEST(TokenizerStreaming, RandomIdsAddUpToTheFullDecode) {
  const Tokenizer tok = Tokenizer::load_dir(kTiny);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 40);
    // Includes unknown ids past the vocabulary.
    for (auto& id : ids) id = static_cast<int32_t>(rng() % (tok.vocab_size() + 10));
    for (const bool skip : {false, true}) {
      StreamingDetokenizer s(tok, skip);
      std::string all;
      for (const int32_t id : ids) {
        const std::string piece = s.push(id);
        ASSERT_TRUE(unicode::is_valid_utf8(piece));
        all += piece;
      }
      all += s.flush();
      ASSERT_EQ(all, tok.decode(ids, skip));
    }
  }
}

// One Tokenizer serves every request: concurrent encodes share the word cache.
TEST(TokenizerApi, ConcurrentEncodesAgree) {
  const Tokenizer tok = Tokenizer::load_dir(kTiny);
  std::vector<std::string> texts;
  std::mt19937 rng(3);
  const std::string alphabet = "abc de\xE4\xBD\xA0 xyz!\n";
  for (int i = 0; i < 200; ++i) {
    std::string t;
    for (size_t n = rng() % 80; n > 0; --n) t += alphabet[rng() % alphabet.size()];
    texts.push_back(unicode::to_valid_utf8(t));
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok.encode(t, false));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k =
              (i * 7 + static_cast<size_t>(t) * 13 + static_cast<size_t>(round)) % texts.size();
          if (tok.encode(texts[k], false) != expected[k]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

double encode_ms(const Tokenizer& tok, const std::string& text, size_t* count) {
  const auto start = std::chrono::steady_clock::now();
  *count = tok.encode(text, false).size();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// One 100k-character word with no split point must not take quadratic time.
TEST(TokenizerAdversarial, HugeSingleWords) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"tiny", kTiny},
      {"spm_bpe", std::string(DEEPINFER_TEST_DATA_DIR) + "/tokenizer/synthetic/spm_bpe"}};
  if (std::filesystem::exists(kShared + "/qwen3/tokenizer.json")) {
    cases.emplace_back("qwen3", kShared + "/qwen3");
  }
#ifdef NDEBUG
  constexpr size_t kChars = 100000;
#else
  constexpr size_t kChars = 20000;  // Debug and sanitizer builds run the same code slower
#endif
  std::string letters(kChars, 'a'), cjk, spaces(kChars, ' ');
  for (size_t i = 0; i < kChars; ++i) cjk += "\u4F60";
  for (const auto& [name, dir] : cases) {
    const Tokenizer tok = std::filesystem::exists(dir + "/tokenizer_config.json")
                              ? Tokenizer::load_dir(dir)
                              : Tokenizer::load(dir + "/tokenizer.json");
    for (const auto* text : {&letters, &cjk, &spaces}) {
      size_t count = 0;
      const double ms = encode_ms(tok, *text, &count);
      EXPECT_GT(count, 0u);
      // Well under a second in Release (typically tens of ms); sanitizer builds get room.
#ifdef NDEBUG
      EXPECT_LT(ms, 1000.0) << name << ": " << text->size() << " bytes took " << ms << " ms";
#else
      EXPECT_LT(ms, 3000.0) << name << ": " << text->size() << " bytes took " << ms << " ms";
#endif
      const char* kind = text == &letters ? "letters" : text == &cjk ? "cjk" : "spaces";
      RecordProperty(name + "_" + kind + "_ms", static_cast<int>(ms));
      EXPECT_EQ(tok.decode(tok.encode(*text, false), false), *text) << name;
    }
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer
