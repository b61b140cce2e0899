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
