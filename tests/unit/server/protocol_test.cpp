#include "server/protocol.h"

#include <gtest/gtest.h>

#include <string>

namespace deepinfer::server {
namespace {

using Json = nlohmann::ordered_json;

// The ApiError a parse raises (fails the test when none is raised).
ApiError error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an ApiError";
  return ApiError(0, "none");
}

ApiError completion_error(const std::string& body) {
  return error_of([&] { parse_completion_request(parse_json_body(body), {}); });
}

ApiError chat_error(const std::string& body) {
  return error_of([&] { parse_chat_request(parse_json_body(body), {}); });
}

TEST(ServerProtocol, CompletionFieldsMapToSamplingParams) {
  const auto r = parse_completion_request(parse_json_body(R"({
    "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
    "top_k": 5, "min_p": 0.1, "repetition_penalty": 1.2, "presence_penalty": -0.5,
    "frequency_penalty": 1.5, "stop": "x", "seed": 42, "n": 3, "logprobs": 2,
    "ignore_eos": true, "priority": -4, "stop_token_ids": [1, 2], "stream": true,
    "stream_options": {"include_usage": true}, "user": "u", "best_of": 3})"),
                                          {});
  EXPECT_EQ(r.api, Api::completions);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[0].text, "Hello");
  EXPECT_EQ(r.max_tokens, 7);
  const auto& p = r.params;
  EXPECT_DOUBLE_EQ(p.temperature, 0.5);
  EXPECT_DOUBLE_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_DOUBLE_EQ(p.min_p, 0.1);
  EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.2);
  EXPECT_DOUBLE_EQ(p.presence_penalty, -0.5);
  EXPECT_DOUBLE_EQ(p.frequency_penalty, 1.5);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.n, 3);
  EXPECT_EQ(p.logprobs, 2);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.priority, -4);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.ignored_fields.empty());
}

TEST(ServerProtocol, DefaultsComeFromGenerationConfigUnlessGiven) {
  SamplingDefaults d;
  d.temperature = 0.6;
  d.top_p = 0.95;
  d.top_k = 20;
  d.repetition_penalty = 1.05;
  const auto omitted = parse_completion_request(parse_json_body(R"({"prompt": "a"})"), d);
  EXPECT_DOUBLE_EQ(omitted.params.temperature, 0.6);
  EXPECT_DOUBLE_EQ(omitted.params.top_p, 0.95);
  EXPECT_EQ(omitted.params.top_k, 20);
  EXPECT_DOUBLE_EQ(omitted.params.repetition_penalty, 1.05);
  EXPECT_FALSE(omitted.params.seed.has_value());
  EXPECT_FALSE(omitted.params.logprobs.has_value());
  // Explicit values (and explicit nulls, which mean "absent") win / fall back as expected.
  const auto given = parse_completion_request(
      parse_json_body(R"({"prompt": "a", "temperature": 0, "top_k": null, "top_p": 1})"), d);
  EXPECT_DOUBLE_EQ(given.params.temperature, 0.0);
  EXPECT_EQ(given.params.top_k, 20);
  EXPECT_DOUBLE_EQ(given.params.top_p, 1.0);
  // Without a generation config: OpenAI's defaults.
  const auto plain = parse_completion_request(parse_json_body(R"({"prompt": "a"})"), {});
  EXPECT_DOUBLE_EQ(plain.params.temperature, 1.0);
  EXPECT_DOUBLE_EQ(plain.params.top_p, 1.0);
  EXPECT_EQ(plain.params.top_k, 0);
  EXPECT_EQ(plain.params.n, 1);
}

TEST(ServerProtocol, PromptForms) {
  const auto parse = [](const std::string& body) {
    return parse_completion_request(parse_json_body(body), {}).prompts;
  };
  const auto ids = parse(R"({"prompt": [5, 6, 7]})");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_FALSE(ids[0].is_text);
  EXPECT_EQ(ids[0].ids, (std::vector<int32_t>{5, 6, 7}));
  const auto texts = parse(R"({"prompt": ["a", "b"]})");
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[1].text, "b");
  const auto batch = parse(R"({"prompt": [[1], [2, 3]]})");
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[1].ids, (std::vector<int32_t>{2, 3}));

  for (const char* bad : {R"({"prompt": []})", R"({"prompt": 5})", R"({"prompt": [1, "a"]})",
                          R"({"prompt": ["a", 1]})", R"({"prompt": [[1], 2]})",
                          R"({"prompt": [[]]})", R"({"prompt": [-1]})", R"({"prompt": [1.5]})",
                          R"({"prompt": [4294967296]})", R"({"prompt": null})", R"({})"}) {
    EXPECT_EQ(completion_error(bad).param(), "prompt") << bad;
  }
}

TEST(ServerProtocol, WrongTypesAndRangesNameTheParameter) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt": "a", "max_tokens": "5"})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 2.5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 1e300})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 18446744073709551615})", "max_tokens"},
      {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "a", "temperature": -0.1})", "temperature"},
      {R"({"prompt": "a", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "a", "top_p": 0})", "top_p"},
      {R"({"prompt": "a", "top_p": 1.01})", "top_p"},
      {R"({"prompt": "a", "top_k": -2})", "top_k"},
      {R"({"prompt": "a", "min_p": 1.5})", "min_p"},
      {R"({"prompt": "a", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "a", "presence_penalty": 3})", "presence_penalty"},
      {R"({"prompt": "a", "frequency_penalty": -2.5})", "frequency_penalty"},
      {R"({"prompt": "a", "n": 0})", "n"},
      {R"({"prompt": "a", "n": 65})", "n"},
      {R"({"prompt": "a", "n": true})", "n"},
      {R"({"prompt": "a", "seed": "x"})", "seed"},
      {R"({"prompt": "a", "stop": 3})", "stop"},
      {R"({"prompt": "a", "stop": ["a", 3]})", "stop"},
      {R"({"prompt": "a", "stop": [""]})", "stop"},
      {R"({"prompt": "a", "stream": "yes"})", "stream"},
      {R"({"prompt": "a", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "a", "stream": true, "stream_options": 1})", "stream_options"},
      {R"({"prompt": "a", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "a", "logprobs": true})", "logprobs"},
      {R"({"prompt": "a", "prompt_logprobs": 21})", "prompt_logprobs"},
      {R"({"prompt": "a", "prompt_logprobs": -1})", "prompt_logprobs"},
      {R"({"prompt": "a", "prompt_logprobs": "3"})", "prompt_logprobs"},
      {R"({"prompt": "a", "prompt_logprobs": 1, "stream": true})", "prompt_logprobs"},
      {R"({"prompt": "a", "ignore_eos": 1})", "ignore_eos"},
      {R"({"prompt": "a", "priority": "high"})", "priority"},
      {R"({"prompt": "a", "stop_token_ids": [-1]})", "stop_token_ids"},
      {R"({"prompt": "a", "model": 5})", "model"},
      {R"({"prompt": "a", "suffix": "x"})", "suffix"},
      {R"({"prompt": "a", "logit_bias": {"5": 10}})", "logit_bias"},
      {R"({"prompt": "a", "best_of": 2})", "best_of"},
      {R"({"prompt": "a", "min_tokens": 3})", "min_tokens"},
      {R"({"prompt": "a", "response_format": {"type": "json_object"}})", "response_format"},
      {R"({"prompt": ["a", "b", "c", "d", "e"], "n": 64})", "prompt"},
  };
  for (const auto& c : cases) {
    const ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body << " -> " << e.what();
    EXPECT_NE(std::string(e.what()).find(c.param), std::string::npos) << e.what();
  }
}

TEST(ServerProtocol, PromptLogprobsEchoAndScoringOnly) {
  // lm-evaluation-harness's loglikelihood request: echo + logprobs, max_tokens 0 or 1.
  auto r = parse_completion_request(
      parse_json_body(R"({"prompt": "a b", "echo": true, "logprobs": 2, "max_tokens": 0})"), {});
  EXPECT_TRUE(r.echo_logprobs());
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_EQ(r.params.prompt_logprobs, 2);
  EXPECT_FALSE(r.prompt_logprobs.has_value());  // no vLLM prompt_logprobs list asked for
  EXPECT_TRUE(r.ignored_fields.empty());
  // vLLM's prompt_logprobs alone, and the larger of the two when both are given.
  r = parse_completion_request(parse_json_body(R"({"prompt": "a", "prompt_logprobs": 3})"), {});
  EXPECT_FALSE(r.echo_logprobs());
  EXPECT_EQ(r.prompt_logprobs, 3);
  EXPECT_EQ(r.params.prompt_logprobs, 3);
  EXPECT_FALSE(r.params.logprobs.has_value());
  r = parse_completion_request(
      parse_json_body(R"({"prompt": "a", "echo": true, "logprobs": 4, "prompt_logprobs": 1})"), {});
  EXPECT_EQ(r.params.prompt_logprobs, 4);
  // Echo without logprobs needs no prompt logprobs; a null prompt_logprobs is absent.
  r = parse_completion_request(
      parse_json_body(R"({"prompt": "a", "echo": true, "prompt_logprobs": null})"), {});
  EXPECT_FALSE(r.params.prompt_logprobs.has_value());
  const auto c = parse_chat_request(
      parse_json_body(R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 0})"),
      {});
  EXPECT_EQ(c.params.prompt_logprobs, 0);
  EXPECT_TRUE(c.ignored_fields.empty());
}

TEST(ServerProtocol, UnknownFieldsAreReportedNotFatal) {
  const auto r = parse_completion_request(
      parse_json_body(R"({"prompt": "a", "frobnicate": 1, "zeta": {"x": []}, "n": 1})"), {});
  EXPECT_EQ(r.ignored_fields, (std::vector<std::string>{"frobnicate", "zeta"}));
  const auto c = parse_chat_request(
      parse_json_body(R"({"messages": [{"role": "user", "content": "hi"}], "prompt": "x"})"), {});
  EXPECT_EQ(c.ignored_fields, std::vector<std::string>{"prompt"});
}

TEST(ServerProtocol, BodyMustBeAJsonObject) {
  for (const char* body : {"{", "", "nul", "{\"prompt\": \"a\",}", "{\"a\": 1} x"}) {
    const auto e = error_of([&] { parse_json_body(body); });
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_json") << body;
  }
  // Invalid UTF-8 and lone surrogates are not JSON text.
  EXPECT_EQ(error_of([] { parse_json_body("{\"prompt\": \"\xff\xfe\"}"); }).code(), "invalid_json");
  EXPECT_EQ(error_of([] { parse_json_body(R"({"prompt": "\ud800"})"); }).code(), "invalid_json");
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  EXPECT_EQ(error_of([&] { parse_json_body(deep); }).code(), "invalid_json");
  // Brackets inside strings do not count as nesting.
  EXPECT_NO_THROW(parse_json_body("{\"p\": \"" + std::string(500, '[') + "\"}"));
  EXPECT_EQ(completion_error("[1, 2]").status(), 400);
  EXPECT_EQ(chat_error("\"text\"").status(), 400);
}

TEST(ServerProtocol, ChatFields) {
  const auto r = parse_chat_request(parse_json_body(R"({
    "model": "m",
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "a"},
                                              {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": null, "tool_calls": []}],
    "max_tokens": 9, "max_completion_tokens": 5, "logprobs": true, "top_logprobs": 3,
    "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto",
    "chat_template_kwargs": {"enable_thinking": false}, "add_generation_prompt": true})"),
                                    {});
  EXPECT_EQ(r.api, Api::chat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_TRUE(r.messages[2].contains("tool_calls"));
  EXPECT_EQ(r.max_tokens, 5);  // max_completion_tokens wins
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  // Key order of messages is kept (templates iterate dicts in insertion order).
  EXPECT_EQ(r.messages[0].begin().key(), "role");

  const auto plain = parse_chat_request(
      parse_json_body(R"({"messages": [{"role": "user", "content": "x"}]})"), {});
  EXPECT_FALSE(plain.params.logprobs.has_value());
  EXPECT_TRUE(plain.tools.is_null());
  EXPECT_FALSE(plain.max_tokens.has_value());
}

TEST(ServerProtocol, ChatErrorsNameTheParameter) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [1]})", "messages"},
      {R"({"messages": [{"content": "x"}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
       "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": []})",
       "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
       "max_completion_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template": "{{x}}"})",
       "chat_template"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 30})",
       "prompt_logprobs"},
  };
  for (const auto& c : cases) {
    const ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body << " -> " << e.what();
  }
}

TEST(ServerProtocol, MaxTokensResolution) {
  SamplingDefaults none;
  auto completion = parse_completion_request(parse_json_body(R"({"prompt": "a"})"), none);
  EXPECT_EQ(resolve_max_tokens(completion, 10, 100, none), 16);  // OpenAI's default
  EXPECT_EQ(resolve_max_tokens(completion, 90, 100, none), 10);  // capped by the room left
  auto chat = parse_chat_request(parse_json_body(R"({"messages": [{"role": "user"}]})"), none);
  EXPECT_EQ(resolve_max_tokens(chat, 10, 100, none), 90);
  SamplingDefaults capped;
  capped.max_tokens = 20;
  EXPECT_EQ(resolve_max_tokens(chat, 10, 100, capped), 20);

  completion.max_tokens = 90;
  EXPECT_EQ(resolve_max_tokens(completion, 10, 100, none), 90);
  const ApiError e = error_of([&] { resolve_max_tokens(completion, 11, 100, none); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "context_length_exceeded");
  EXPECT_EQ(e.param(), "prompt");
  EXPECT_NE(std::string(e.what()).find("maximum context length is 100 tokens"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("requested 101 tokens (11 in the prompt, 90 in the"),
            std::string::npos)
      << e.what();
  // A prompt that fills the context leaves no room even for the default.
  EXPECT_EQ(error_of([&] { resolve_max_tokens(chat, 100, 100, none); }).param(), "messages");
}

TEST(ServerProtocol, ErrorObjectShape) {
  const ApiError e(404, "The model `x` does not exist.", "model", "model_not_found");
  EXPECT_EQ(e.to_json().dump(),
            R"({"error":{"message":"The model `x` does not exist.","type":)"
            R"("invalid_request_error","param":"model","code":"model_not_found"}})");
  EXPECT_EQ(ApiError(503, "busy").to_json().dump(),
            R"({"error":{"message":"busy","type":"server_error","param":null,"code":null}})");
  // Invalid UTF-8 quoted in a message never breaks the error body.
  EXPECT_NE(error_body(400, "bad \xff byte").find("bad \xef\xbf\xbd byte"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::server
