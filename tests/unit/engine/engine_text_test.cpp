// Text through the engine (tiny Qwen3 tokenizer): text prompts, streamed text deltas, and
// stop strings that straddle token boundaries.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {
namespace {

using testing::greedy_params;
using testing::test_pool;
using testing::tiny_qwen3;

const tokenizer::Tokenizer& tiny_tokenizer() {
  static const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load_dir(testing::tiny_qwen3_dir());
  return tok;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80         ? 1
                       : (c >> 5) == 6  ? 2
                       : (c >> 4) == 14 ? 3
                       : (c >> 3) == 30 ? 4
                                        : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

struct Streamed {
  std::vector<int32_t> tokens;
  std::vector<std::string> deltas;
  std::string text;
  FinishReason reason = FinishReason::none;
  std::string stop;
};

Streamed run_text(const std::string& prompt, const SamplingParams& params) {
  EngineConfig config;
  config.max_num_blocks = 32;
  Engine engine(tiny_qwen3(), test_pool(), config, &tiny_tokenizer());
  engine.add_request_text(prompt, params);
  Streamed s;
  while (engine.has_unfinished()) {
    for (const auto& out : engine.step()) {
      for (const auto& d : out.completions) {
        s.tokens.insert(s.tokens.end(), d.token_ids.begin(), d.token_ids.end());
        s.deltas.push_back(d.text);
        s.text += d.text;
        if (d.finish_reason != FinishReason::none) {
          s.reason = d.finish_reason;
          s.stop = d.stop;
        }
      }
    }
  }
  return s;
}

const char* const kPrompt = "Hello world, h\xC3\xA9llo \xE2\x86\x92 ok";

TEST(EngineText, TextPromptStreamsTheDecodedContinuation) {
  const Streamed s = run_text(kPrompt, greedy_params(30));
  ASSERT_EQ(s.tokens.size(), 30u);
  EXPECT_EQ(s.text, tiny_tokenizer().decode(s.tokens, true));
  for (const auto& d : s.deltas) EXPECT_TRUE(valid_utf8(d)) << d;
  // The prompt was encoded as the tokenizer encodes it.
  const auto ids = tiny_tokenizer().encode(kPrompt, true);
  EXPECT_EQ(s.tokens, testing::solo_greedy(ids, 30));
}

// Stop strings made of the end of one token's text and the start of the next one's.
TEST(EngineText, StopStringsAcrossTokenBoundariesAreCutAndNeverStreamed) {
  const Streamed full = run_text(kPrompt, greedy_params(30));
  const auto& tok = tiny_tokenizer();
  int tried = 0;
  for (size_t i = 0; i + 1 < full.tokens.size() && tried < 4; ++i) {
    const std::string a = tok.decode(std::vector<int32_t>{full.tokens[i]}, true);
    const std::string b = tok.decode(std::vector<int32_t>{full.tokens[i + 1]}, true);
    if (a.size() < 2 || b.size() < 2 || !valid_utf8(a) || !valid_utf8(b) ||
        a.find("\xEF\xBF\xBD") != std::string::npos ||
        b.find("\xEF\xBF\xBD") != std::string::npos) {
      continue;
    }
    // Last character of a (possibly multi-byte) + first byte-run of b's first character.
    size_t cut = a.size() - 1;
    while (cut > 0 && (static_cast<unsigned char>(a[cut]) & 0xC0) == 0x80) --cut;
    size_t head = 1;
    while (head < b.size() && (static_cast<unsigned char>(b[head]) & 0xC0) == 0x80) ++head;
    const std::string stop = a.substr(cut) + b.substr(0, head);
    ++tried;

    SamplingParams p = greedy_params(30);
    p.stop = {"\x01never", stop};
    const Streamed s = run_text(kPrompt, p);
    const size_t at = full.text.find(stop);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(s.text, full.text.substr(0, at)) << "stop '" << stop << "'";
    EXPECT_EQ(s.reason, FinishReason::stop);
    EXPECT_EQ(s.stop, stop);
    for (const auto& d : s.deltas) {
      EXPECT_TRUE(valid_utf8(d));
      EXPECT_EQ(d.find(stop), std::string::npos);
    }
    // Tokens stop at the one completing the match; they agree with the unstopped run.
    EXPECT_LE(s.tokens.size(), i + 2);
    EXPECT_EQ(s.tokens, std::vector<int32_t>(full.tokens.begin(),
                                             full.tokens.begin() + std::ssize(s.tokens)));
  }
  EXPECT_GE(tried, 2) << "the continuation had too few clean token pairs to test";
}

}  // namespace
}  // namespace deepinfer::engine
