#include "server/responses.h"

#include <gtest/gtest.h>

#include <string>

namespace deepinfer::server {
namespace {

const tokenizer::Tokenizer& tiny_tokenizer() {
  static const auto tok = tokenizer::Tokenizer::load_dir(DEEPINFER_TEST_DATA_DIR "/tiny-qwen3");
  return tok;
}

ResponseMeta meta_for(Api api) {
  ResponseMeta m;
  m.api = api;
  m.id = api == Api::chat ? "chatcmpl-1" : "cmpl-1";
  m.created = 1700000000;
  m.model = "tiny";
  return m;
}

std::string decode1(int32_t id) {
  const int32_t ids[] = {id};
  return tiny_tokenizer().decode(ids, false);
}

TEST(ServerResponses, CompletionObject) {
  std::vector<ChoiceResult> choices(2);
  choices[0].text = "ab";
  choices[0].finish_reason = engine::FinishReason::length;
  choices[1].text = "c";
  choices[1].finish_reason = engine::FinishReason::stop;
  const Json r = response_json(meta_for(Api::completions), tiny_tokenizer(), choices, {7, 5});
  EXPECT_EQ(r.dump(),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[{"index":0,"text":"ab","logprobs":null,"finish_reason":"length"},)"
            R"({"index":1,"text":"c","logprobs":null,"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}})");
}

TEST(ServerResponses, ChatObjectAndChunks) {
  auto meta = meta_for(Api::chat);
  std::vector<ChoiceResult> choices(1);
  choices[0].text = "hi";
  choices[0].finish_reason = engine::FinishReason::stop;
  EXPECT_EQ(response_json(meta, tiny_tokenizer(), choices, {3, 1}).dump(),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,)"
            R"("model":"tiny","choices":[{"index":0,"message":{"role":"assistant",)"
            R"("content":"hi"},"logprobs":null,"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})");
  EXPECT_EQ(
      sse_event(chat_chunk(meta, 0, Json{{"content", "x"}}, Json(), engine::FinishReason::none)),
      "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":"
      "1700000000,\"model\":\"tiny\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
      "\"x\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
  meta.include_usage = true;
  const Json chunk = chat_chunk(meta, 1, Json::object(), Json(), engine::FinishReason::length);
  EXPECT_TRUE(chunk.at("usage").is_null());
  EXPECT_EQ(chunk.at("choices")[0].at("finish_reason"), "length");
  const Json usage = usage_chunk(meta, {4, 6});
  EXPECT_TRUE(usage.at("choices").empty());
  EXPECT_EQ(usage.at("usage").at("total_tokens"), 10);
  EXPECT_EQ(usage.at("object"), "chat.completion.chunk");
}

TEST(ServerResponses, CompletionLogprobs) {
  auto meta = meta_for(Api::completions);
  meta.logprobs = true;
  meta.top_logprobs = 2;
  const std::vector<int32_t> ids = {39, 392};
  std::vector<engine::TokenLogprobs> lps(2);
  lps[0].chosen = -0.5f;
  lps[0].top = {{39, -0.5f}, {75, -1.5f}};
  lps[1].chosen = -2.0f;  // sampled, not among the top 2
  lps[1].top = {{450, -0.25f}, {67, -1.0f}};
  size_t offset = 3;  // e.g. after an echoed prompt
  const Json lp = logprobs_json(meta, tiny_tokenizer(), ids, lps, offset);
  EXPECT_EQ(lp.at("tokens"), (Json{decode1(39), decode1(392)}));
  EXPECT_EQ(lp.at("token_logprobs"), (Json{-0.5, -2.0}));
  EXPECT_EQ(lp.at("text_offset"), (Json{3, 3 + decode1(39).size()}));
  EXPECT_EQ(offset, 3 + decode1(39).size() + decode1(392).size());
  // Top 2 plus the sampled token when it is not among them.
  const Json& second = lp.at("top_logprobs")[1];
  EXPECT_EQ(second.size(), 3u);
  EXPECT_EQ(second.at(decode1(450)), -0.25);
  EXPECT_EQ(second.at(decode1(392)), -2.0);
  EXPECT_EQ(lp.at("top_logprobs")[0].size(), 2u);
}

engine::TokenLogprobs token_lp(float chosen, int64_t rank,
                               std::vector<std::pair<int32_t, float>> top) {
  engine::TokenLogprobs lp;
  lp.chosen = chosen;
  lp.chosen_rank = rank;
  lp.top = std::move(top);
  return lp;
}

TEST(ServerResponses, VllmPromptLogprobsList) {
  const std::vector<int32_t> prompt = {39, 392, 75};
  const std::vector<engine::TokenLogprobs> lps = {
      token_lp(-3.0f, 4, {{450, -0.5f}, {67, -1.0f}}),
      token_lp(-0.25f, 1, {{75, -0.25f}, {39, -2.0f}})};  // the prompt token is the top one
  const Json list = prompt_logprobs_json(tiny_tokenizer(), prompt, lps, 2);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_TRUE(list[0].is_null());
  // vLLM's order: the prompt token (its vocabulary rank), then the top-N with ranks 1..N.
  EXPECT_EQ(list[1].dump(),
            Json::parse(R"({"392": {"logprob": -3.0, "rank": 4, "decoded_token": )" +
                        Json(decode1(392)).dump() +
                        R"(}, "450": {"logprob": -0.5, )"
                        R"("rank": 1, "decoded_token": )" +
                        Json(decode1(450)).dump() +
                        R"(}, "67": {"logprob": -1.0, "rank": 2, "decoded_token": )" +
                        Json(decode1(67)).dump() + "}}")
                .dump());
  EXPECT_EQ(list[2].size(), 2u);  // 75 once, with its rank 1
  EXPECT_EQ(list[2].at("75").at("rank"), 1);
  EXPECT_EQ(list[2].at("39").at("rank"), 2);
  // In a completions choice, and at the top of a chat response (as vLLM places them).
  std::vector<ChoiceResult> choices(1);
  choices[0].prompt_logprobs = list;
  EXPECT_EQ(response_json(meta_for(Api::completions), tiny_tokenizer(), choices, {3, 0})
                .at("choices")[0]
                .at("prompt_logprobs"),
            list);
  EXPECT_EQ(
      response_json(meta_for(Api::chat), tiny_tokenizer(), choices, {3, 0}).at("prompt_logprobs"),
      list);
  choices[0].prompt_logprobs = Json();
  EXPECT_FALSE(response_json(meta_for(Api::completions), tiny_tokenizer(), choices, {3, 0})
                   .at("choices")[0]
                   .contains("prompt_logprobs"));
}

TEST(ServerResponses, EchoLogprobsCoverThePromptThenTheCompletion) {
  auto meta = meta_for(Api::completions);
  meta.logprobs = true;
  meta.top_logprobs = 1;
  std::vector<ChoiceResult> choices(1);
  choices[0].echo_token_ids = {39, 392};
  choices[0].echo_logprobs = {token_lp(-3.0f, 4, {{450, -0.5f}})};
  choices[0].token_ids = {75};
  choices[0].logprobs = {token_lp(-0.75f, 1, {{75, -0.75f}})};
  choices[0].text = decode1(39) + decode1(392) + decode1(75);
  choices[0].text_offset = 99;  // ignored: offsets restart at the echoed prompt
  const Json lp =
      response_json(meta, tiny_tokenizer(), choices, {2, 1}).at("choices")[0].at("logprobs");
  EXPECT_EQ(lp.at("tokens"), (Json{decode1(39), decode1(392), decode1(75)}));
  EXPECT_EQ(lp.at("token_logprobs"), (Json{nullptr, -3.0, -0.75}));
  const size_t a = decode1(39).size();
  const size_t b = a + decode1(392).size();
  EXPECT_EQ(lp.at("text_offset"), (Json{0, a, b}));
  EXPECT_TRUE(lp.at("top_logprobs")[0].is_null());
  EXPECT_EQ(lp.at("top_logprobs")[1].size(), 2u);  // top-1 plus the prompt token
  EXPECT_EQ(lp.at("top_logprobs")[1].at(decode1(392)), -3.0);
  EXPECT_EQ(lp.at("top_logprobs")[2].size(), 1u);
  // The same pieces as a stream would send them: the echo chunk, then the tokens.
  size_t offset = 0;
  Json parts = echo_logprobs_json(meta, tiny_tokenizer(), choices[0].echo_token_ids,
                                  choices[0].echo_logprobs, offset);
  EXPECT_EQ(offset, b);
  append_logprobs(parts, logprobs_json(meta, tiny_tokenizer(), choices[0].token_ids,
                                       choices[0].logprobs, offset));
  EXPECT_EQ(parts, lp);
}

TEST(ServerResponses, ChatLogprobsCarryBytes) {
  auto meta = meta_for(Api::chat);
  meta.logprobs = true;
  meta.top_logprobs = 1;
  std::vector<engine::TokenLogprobs> lps(1);
  lps[0].chosen = -0.75f;
  lps[0].top = {{75, -0.5f}, {39, -0.75f}};
  size_t offset = 0;
  const Json lp = logprobs_json(meta, tiny_tokenizer(), {39}, lps, offset);
  const Json& entry = lp.at("content")[0];
  EXPECT_EQ(entry.at("token"), decode1(39));
  EXPECT_EQ(entry.at("logprob"), -0.75);
  Json bytes = Json::array();
  for (unsigned char c : decode1(39)) bytes.push_back(static_cast<int>(c));
  EXPECT_EQ(entry.at("bytes"), bytes);
  ASSERT_EQ(entry.at("top_logprobs").size(), 1u);
  EXPECT_EQ(entry.at("top_logprobs")[0].at("token"), decode1(75));
}

TEST(ServerResponses, InvalidUtf8NeverBreaksTheJson) {
  const Json j = {{"text", std::string("a\xff"
                                       "b")}};
  EXPECT_EQ(dump_json(j),
            "{\"text\":\"a\xef\xbf\xbd"
            "b\"}");
  EXPECT_EQ(make_response_id(Api::chat).rfind("chatcmpl-", 0), 0u);
  EXPECT_NE(make_response_id(Api::completions), make_response_id(Api::completions));
}

}  // namespace
}  // namespace deepinfer::server
