// Each normalizer, pre-tokenizer, decoder and the regex layer on hand-checked examples
// (the expected values are what the Python `tokenizers` 0.23 components return).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::json;
using Strings = std::vector<std::string>;

Strings pre_tokenize(const json& spec, const std::string& text) {
  auto pre = make_pre_tokenizer(spec, "test.json");
  PreTokenized pieces;
  pieces.text = text;
  pieces.spans.push_back({0, static_cast<uint32_t>(text.size()), true});
  pre->pre_tokenize(pieces, deepinfer::tokenizer::TextBudget::unlimited());
  Strings out;
  for (const Span& s : pieces.spans) out.push_back(pieces.text.substr(s.begin, s.end - s.begin));
  return out;
}

json split(const std::string& regex, const std::string& behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", behavior},
          {"invert", invert}};
}

std::string normalize(const json& spec, const std::string& text, bool* start_kept = nullptr) {
  auto n = make_normalizer(spec, "test.json");
  std::string out = text;
  bool kept = true;
  n->normalize(out, kept, deepinfer::tokenizer::TextBudget::unlimited());
  if (start_kept != nullptr) *start_kept = kept;
  return out;
}

std::string decode(const json& spec, Strings tokens) {
  make_decoder(spec, "test.json")->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::vector<Match> matches(const std::string& regex, const std::string& text) {
  std::vector<Match> out;
  Regex::compile(regex, "test")->find_all(text, out);
  return out;
}

TEST(TokenizerRegex, FollowsOnigurumaIteration) {
  // An empty match right after the previous match is skipped, as onig's find_iter does.
  EXPECT_EQ(matches("a*", "baab"), (std::vector<Match>{{0, 0}, {1, 3}, {4, 4}}));
  EXPECT_EQ(pre_tokenize(split("a*", "Isolated"), "baab"), (Strings{"b", "aa", "b"}));
  EXPECT_EQ(pre_tokenize(split("(?=b)", "Isolated"), "abab"), (Strings{"a", "ba", "b"}));
}

TEST(TokenizerRegex, WhitespaceIsTheUnicodeProperty) {
  // U+0085 is White_Space, U+180E is not (PCRE2's own \s would say the opposite).
  EXPECT_EQ(pre_tokenize(split("\\s+", "Isolated"), "a\u0085b\u180Ec d"),
            (Strings{"a", "\u0085", "b\u180Ec", " ", "d"}));
  EXPECT_EQ(translate_pattern("\\s+(?!\\S)"), "\\p{White_Space}+(?!\\P{White_Space})");
  EXPECT_EQ(translate_pattern("[\\w-]\\W"),
            "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}-][^\\p{L}\\p{M}\\p{Nd}\\p{Pc}]");
  EXPECT_EQ(translate_pattern("\\u00e9[[:alpha:]\\]]"), "\\x{00e9}[[:alpha:]\\]]");
}

TEST(TokenizerRegex, RejectsBadPatternsNamingThem) {
  try {
    Regex::compile("(unclosed", "model/tokenizer.json: pre_tokenizer Split");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model/tokenizer.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos);
  }
}

TEST(TokenizerPreTokenizers, QwenSplitRegex) {
  const std::string qwen =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  EXPECT_EQ(pre_tokenize(split(qwen, "Isolated"), "Hello  world's 123\n\n  x!!\n"),
            (Strings{"Hello", " ", " world", "'s", " ", "1", "2", "3", "\n\n", " ", " x", "!!\n"}));
}

TEST(TokenizerPreTokenizers, SplitBehaviors) {
  EXPECT_EQ(pre_tokenize(split("[.!?]+", "MergedWithPrevious"), "Hi. You!? ok"),
            (Strings{"Hi.", " You!?", " ok"}));
  EXPECT_EQ(pre_tokenize(split("[(\\[]", "MergedWithNext"), "f(x)[y]"),
            (Strings{"f", "(x)", "[y]"}));
  EXPECT_EQ(pre_tokenize(split("\\d", "Contiguous"), "ab12c3"), (Strings{"ab", "12", "c", "3"}));
  EXPECT_EQ(pre_tokenize(split("\\d+", "Removed", true), "ab12c3d"), (Strings{"12", "3"}));
  EXPECT_EQ(pre_tokenize(split("\\d+", "Isolated", true), "ab12c3d"),
            (Strings{"ab", "12", "c", "3", "d"}));
  const json literal = {{"type", "Split"},
                        {"pattern", {{"String", "ab"}}},
                        {"behavior", "MergedWithNext"},
                        {"invert", false}};
  EXPECT_EQ(pre_tokenize(literal, "xabyabab"), (Strings{"x", "aby", "ab", "ab"}));
}

TEST(TokenizerPreTokenizers, ByteLevel) {
  EXPECT_EQ(pre_tokenize({{"type", "ByteLevel"}, {"add_prefix_space", true}}, "Hey  you"),
            (Strings{"\u0120Hey", "\u0120", "\u0120you"}));
  EXPECT_EQ(pre_tokenize({{"type", "ByteLevel"}, {"add_prefix_space", false}},
                         "Hello my friend's, 1234 \u2B62"),
            (Strings{"Hello", "\u0120my", "\u0120friend", "'s", ",", "\u01201234",
                     "\u0120\u00E2\u0143\u00A2"}));
  EXPECT_EQ(pre_tokenize({{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}},
                         "hi there"),
            (Strings{"\u0120hi\u0120there"}));
  // The prefix space goes onto every piece an earlier step produced.
  const json seq = {{"type", "Sequence"},
                    {"pretokenizers",
                     {{{"type", "Digits"}, {"individual_digits", true}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", true}}}}};
  EXPECT_EQ(pre_tokenize(seq, "ab12 cd"), (Strings{"\u0120ab", "\u01201", "\u01202", "\u0120cd"}));
}

TEST(TokenizerPreTokenizers, Metaspace) {
  const auto meta = [](const char* scheme, bool split_on) {
    return json{{"type", "Metaspace"},
                {"replacement", "\u2581"},
                {"prepend_scheme", scheme},
                {"split", split_on}};
  };
  EXPECT_EQ(pre_tokenize(meta("always", true), "Hey  you"),
            (Strings{"\u2581Hey", "\u2581", "\u2581you"}));
  EXPECT_EQ(pre_tokenize(meta("never", true), "Hey  you"), (Strings{"Hey", "\u2581", "\u2581you"}));
  EXPECT_EQ(pre_tokenize(meta("first", false), " Hey you"), (Strings{"\u2581Hey\u2581you"}));
  // Legacy form: add_prefix_space instead of prepend_scheme.
  EXPECT_EQ(pre_tokenize({{"type", "Metaspace"}, {"replacement", "_"}, {"add_prefix_space", false}},
                         "a b"),
            (Strings{"a", "_b"}));
}

TEST(TokenizerPreTokenizers, CharacterClassSplitters) {
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "a123b\u06634"),
            (Strings{"a", "1", "2", "3", "b", "\u0663", "4"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "a123b\u06634"),
            (Strings{"a", "123", "b", "\u06634"}));
  EXPECT_EQ(pre_tokenize({{"type", "Whitespace"}}, "Hey, you!  42x_y e\u0301\u0301"),
            (Strings{"Hey", ",", "you", "!", "42x_y", "e\u0301\u0301"}));
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}}, "  a\tb\u00A0c\n"),
            (Strings{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}}, "a,b!!c\u00BFd"),
            (Strings{"a", ",", "b", "!", "!", "c", "\u00BF", "d"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}, {"behavior", "Contiguous"}}, "a,b!!c\u00BFd"),
            (Strings{"a", ",", "b", "!!", "c", "\u00BF", "d"}));
  EXPECT_EQ(pre_tokenize({{"type", "CharDelimiterSplit"}, {"delimiter", "-"}}, "a-b--c"),
            (Strings{"a", "b", "c"}));
}

TEST(TokenizerNormalizers, UnicodeForms) {
  EXPECT_EQ(normalize({{"type", "NFC"}}, "e\u0301 A\u030A \u212B"), "\u00E9 \u00C5 \u00C5");
  EXPECT_EQ(normalize({{"type", "NFD"}}, "\u00E9\uAC00"), "e\u0301\u1100\u1161");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\uFB01 \u00B2 \uFF21 \uFF76"), "fi 2 A \u30AB");
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\uFB01\u00E9"), "fie\u0301");
  // Conjoining jamo compose under NFC.
  EXPECT_EQ(normalize({{"type", "NFC"}}, "\u1100\u1161\u11A8"), "\uAC01");
}

// The fast path skips utf8proc for characters it deems inert; check that claim against
// utf8proc itself for every code point of the table, alone and after a base letter, and on
// mixed strings where only some stretches need the slow path.
TEST(TokenizerNormalizers, FastPathAgreesWithUtf8proc) {
  const auto reference = [](const std::string& s, int options) {
    utf8proc_uint8_t* out = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                static_cast<utf8proc_ssize_t>(s.size()), &out,
                                static_cast<utf8proc_option_t>(UTF8PROC_STABLE | options));
    std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    return r;
  };
  const std::pair<unicode::NormalForm, int> forms[] = {
      {unicode::NormalForm::kNFC, UTF8PROC_COMPOSE},
      {unicode::NormalForm::kNFD, UTF8PROC_DECOMPOSE},
      {unicode::NormalForm::kNFKC, UTF8PROC_COMPOSE | UTF8PROC_COMPAT}};
  int mismatches = 0;
#ifdef NDEBUG
  constexpr char32_t kStep = 1;
#else
  constexpr char32_t kStep = 3;  // Debug and sanitizer builds sample every third one
#endif
  for (char32_t cp = 1; cp < 0x30000; cp += kStep) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string one;
    unicode::append_utf8(one, cp);
    for (const auto& [form, options] : forms) {
      for (const std::string& s : {one, "e" + one}) {
        if (unicode::normalize(s, form) != reference(s, options) && ++mismatches < 10) {
          ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(cp) << " form "
                        << static_cast<int>(form);
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  const std::string mixed =
      "abc e\u0301 \u4E2D\u6587 \uAC00\u11A8 x\u0323\u0307 \u212B end \u0915\u093C\u094D ok";
  for (const auto& [form, options] : forms) {
    EXPECT_EQ(unicode::normalize(mixed, form), reference(mixed, options));
  }
}

TEST(TokenizerNormalizers, TextEdits) {
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "\u0130\u03A3A"), "i\u0307\u03C3a");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}},
                      "a \t\n b"),
            "a b");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}},
                      "a b "),
            "a\u2581b\u2581");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\u2581"}}, "x"), "\u2581x");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\u2581"}}, ""), "");
  EXPECT_EQ(normalize({{"type", "Append"}, {"append", "!"}}, "x"), "x!");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  a  "),
            "a  ");
  EXPECT_EQ(
      normalize({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, "  a \u3000"),
      "  a");
  EXPECT_EQ(normalize({{"type", "StripAccents"}}, "e\u0301\u0903x"), "ex");
  EXPECT_EQ(normalize({{"type", "ByteLevel"}}, "a \u00E9"), "a\u0120\u00C3\u00A9");
  const json seq = {{"type", "Sequence"},
                    {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}};
  EXPECT_EQ(normalize(seq, "\uFF21B"), "ab");
}

TEST(TokenizerNormalizers, ReportWhenTheStartIsRemoved) {
  bool kept = true;
  normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, " a", &kept);
  EXPECT_FALSE(kept);
  normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "a ", &kept);
  EXPECT_TRUE(kept);
  normalize({{"type", "StripAccents"}}, "\u0301a", &kept);
  EXPECT_FALSE(kept);
  normalize({{"type", "Replace"}, {"pattern", {{"String", "x"}}}, {"content", ""}}, "xa", &kept);
  EXPECT_FALSE(kept);
  normalize({{"type", "Replace"}, {"pattern", {{"String", "x"}}}, {"content", "y"}}, "xa", &kept);
  EXPECT_TRUE(kept);
}

TEST(TokenizerDecoders, ByteLevel) {
  // Tokens outside the byte map keep their own text; the bytes are repaired as a whole.
  EXPECT_EQ(decode({{"type", "ByteLevel"}},
                   {"Hello", "\u0120w", "orld", "\u0120<|x|>", "\u00C3\u00A9", "\u00C3"}),
            "Hello world <|x|>\u00E9\uFFFD");
}

TEST(TokenizerDecoders, SentencePieceStyleChain) {
  const json chain = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(decode(chain, {"\u2581Hi", "\u2581<0xE4>", "<0xB8>", "<0xAD>", "!"}),
            "Hi <0xE4>\uFFFD\uFFFD!");
  EXPECT_EQ(decode(chain, {"\u2581Hi", "<0xE4>", "<0xB8>", "<0xAD>"}), "Hi\u4E2D");
  // A run with any invalid byte becomes one U+FFFD per byte.
  EXPECT_EQ(decode({{"type", "ByteFallback"}},
                   {"<0xE4>", "<0xB8>", "a", "<0xFF>", "<0xE4>", "<0xB8>", "<0xAD>"}),
            "\uFFFD\uFFFDa\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(decode({{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 1}},
                   {"   a  ", " b", "c "}),
            " a bc");
}

TEST(TokenizerDecoders, WordLevelStyles) {
  EXPECT_EQ(decode({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}},
                   {"\u2581\u2581Hey", "\u2581x"}),
            "Hey x");
  EXPECT_EQ(decode({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}},
                   {"\u2581\u2581Hey", "\u2581x"}),
            "  Hey x");
  EXPECT_EQ(decode({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}},
                   {"hel", "##lo", "world", "."}),
            "hello world.");
  EXPECT_EQ(
      decode({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "wor", "ld</w>"}),
      "hello world");
  EXPECT_EQ(decode({{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                   {"\u2581a", "b\u2581"}),
            " ab ");
}

TEST(TokenizerComponents, UnsupportedTypesNameTypeAndFile) {
  const auto expect_error = [](auto&& make, const json& spec, const std::string& type) {
    try {
      make(spec, "dir/tokenizer.json");
      ADD_FAILURE() << "no error for " << type;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(type), std::string::npos) << what;
      EXPECT_NE(what.find("dir/tokenizer.json"), std::string::npos) << what;
    }
  };
  expect_error(make_normalizer, {{"type", "Precompiled"}}, "Precompiled");
  expect_error(make_normalizer, {{"type", "BertNormalizer"}}, "BertNormalizer");
  expect_error([](const json& j, const std::string& s) { return make_pre_tokenizer(j, s); },
               {{"type", "BertPreTokenizer"}}, "BertPreTokenizer");
  expect_error([](const json& j, const std::string& s) { return make_pre_tokenizer(j, s); },
               {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}},
               "Sideways");
  expect_error(make_decoder, {{"type", "CTC"}}, "CTC");
  expect_error(make_normalizer, json::array(), "normalizer");
}

}  // namespace
}  // namespace deepinfer::tokenizer
