#include "server/tool_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "server/responses.h"
#include "tokenizer/chat_template.h"

namespace deepinfer::server {
namespace {

using Json = nlohmann::ordered_json;

GenerationRequest chat(const std::string& body) {
  return parse_chat_request(parse_json_body(body), {});
}

ApiError chat_error(const std::string& body) {
  try {
    chat(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "d",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "now"}}])";

TEST(ServerTools, ToolFields) {
  const auto r = chat(std::string(R"({"messages": [{"role": "user", "content": "x"}], "tools": )") +
                      kTools + R"(, "tool_choice": "auto", "parallel_tool_calls": false})");
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.tool_choice, ToolChoice::automatic);
  EXPECT_FALSE(r.parallel_tool_calls);

  const auto none =
      chat(std::string(R"({"messages": [{"role": "user", "content": "x"}], "tools": )") + kTools +
           R"(, "tool_choice": "none"})");
  EXPECT_EQ(none.tool_choice, ToolChoice::none);
  EXPECT_EQ(none.tools.size(), 2u);  // still shown to the template, as vLLM does

  const auto plain = chat(R"({"messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(plain.tool_choice, ToolChoice::automatic);
  EXPECT_TRUE(plain.parallel_tool_calls);
  EXPECT_TRUE(plain.tools.is_null());
}

TEST(ServerTools, ErrorsNameTheField) {
  const std::string user = R"({"messages": [{"role": "user", "content": "x"}], )";
  const std::string tools = std::string(R"("tools": )") + kTools;
  struct Case {
    std::string body;
    std::string param;
    std::string says;  // part of the message
  };
  const Case cases[] = {
      {user + R"("tools": [1]})", "tools", "tools[0] must be an object"},
      {user + R"("tools": [{"type": "retrieval", "function": {"name": "f"}}]})", "tools",
       "tools[0].type"},
      {user + R"("tools": [{"type": "function"}]})", "tools", "tools[0].function"},
      {user + R"("tools": [{"type": "function", "function": {"name": ""}}]})", "tools",
       "function.name"},
      {user + R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})",
       "tools", "parameters"},
      {user + tools + R"(, "tool_choice": "required"})", "tool_choice", "guided decoding"},
      {user + tools + R"(, "tool_choice": "always"})", "tool_choice", "must be"},
      {user + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "now"}}})",
       "tool_choice", "guided decoding"},
      {user + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
       "tool_choice", "not among 'tools'"},
      {user + tools + R"(, "tool_choice": {"type": "function"}})", "tool_choice", "must be"},
      {user + tools + R"(, "parallel_tool_calls": "yes"})", "parallel_tool_calls", ""},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", "messages",
       "only assistant messages"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": {}}]})", "messages",
       "tool_calls must be an array"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}]})",
       "messages", "messages[0].tool_calls[0].function must be an object"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]})",
       "messages", "function.name"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
          "arguments": "{bad"}}]}]})",
       "messages", "not the JSON text of an object"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
          "arguments": 5}}]}]})",
       "messages", "arguments must be a JSON string"},
      {R"({"messages": [{"role": "tool", "content": "22 C", "tool_call_id": 7}]})", "messages",
       "tool_call_id"},
  };
  for (const auto& c : cases) {
    const ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body << " -> " << e.what();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
  }
}

TEST(ServerTools, HistoryArgumentsBecomeMappings) {
  const auto r = chat(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
          {"id": "call_1", "type": "function",
           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"n\": 2}"}},
          {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": ""}},
          {"id": "call_3", "type": "function", "function": {"name": "x", "arguments": {"k": 1}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "22 C"}]})");
  const auto mapped = with_mapping_arguments(r.messages);
  ASSERT_TRUE(mapped.has_value());
  const Json& calls = (*mapped)[1]["tool_calls"];
  EXPECT_EQ(calls[0]["function"]["arguments"].dump(), R"({"city":"Paris","n":2})");
  EXPECT_EQ(calls[1]["function"]["arguments"].dump(), "{}");
  EXPECT_EQ(calls[2]["function"]["arguments"].dump(), R"({"k":1})");
  EXPECT_EQ(calls[0]["id"], "call_1");
  // The request's own messages are left as sent.
  EXPECT_TRUE(r.messages[1]["tool_calls"][0]["function"]["arguments"].is_string());
  EXPECT_FALSE(
      with_mapping_arguments(chat(R"({"messages": [{"role": "user", "content": "x"}]})").messages)
          .has_value());
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The server renders mapping arguments first and falls back to the strings when the template
// fails: Qwen's templates need the mapping (tojson), DeepSeek-V3's concatenates strings.
TEST(ServerTools, RealTemplatesTakeTheArgumentShapesTheServerTries) {
  const std::filesystem::path shared(DEEPINFER_SHARED_DIR);
  if (!std::filesystem::exists(shared / "tokenizers")) {
    GTEST_SKIP() << "no " << shared << "/tokenizers (shared test data absent)";
  }
  const auto r = chat(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "22 C"}]})");
  const Json mapped = *with_mapping_arguments(r.messages);
  const Json tools = Json::parse(kTools);
  const auto config_template = [&](const char* dir) {
    return tokenizer::ChatTemplate::parse(
        Json::parse(read_file(shared / "tokenizers" / dir / "tokenizer_config.json"))
            .at("chat_template")
            .get<std::string>());
  };
  const auto qwen = config_template("qwen3");
  const std::string q = qwen.render(mapped, tools, true, "", "<|im_end|>");
  EXPECT_NE(
      q.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"),
      std::string::npos)
      << q;
  // DeepSeek-V3.1 concatenates strings (its content check needs the "" the server puts for a
  // null content: transformers drops a null one and the template then adds an undefined).
  EXPECT_EQ(r.messages[1]["content"], "");
  const Json& ds_messages = r.messages;
  const Json& ds_mapped = mapped;
  const auto deepseek =
      tokenizer::ChatTemplate::parse(read_file(shared / "chat_templates/deepseek-v3.1.jinja"));
  EXPECT_THROW(deepseek.render(ds_mapped, tools, true, "<bos>", "<eos>"), Error);
  const std::string d = deepseek.render(ds_messages, tools, true, "<bos>", "<eos>");
  EXPECT_NE(d.find("get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"),
            std::string::npos)
      << d;
}

TEST(ServerTools, ResponseMessageWithToolCalls) {
  static const auto tok = tokenizer::Tokenizer::load_dir(DEEPINFER_TEST_DATA_DIR "/tiny-qwen3");
  ResponseMeta meta;
  meta.api = Api::chat;
  meta.id = "chatcmpl-1";
  meta.created = 1700000000;
  meta.model = "tiny";
  std::vector<ChoiceResult> choices(3);
  choices[0].tools_parsed = true;
  choices[0].tool_calls = {{"get_weather", R"({"city":"Paris"})"}};
  choices[0].tool_call_ids = {"call_a"};
  choices[0].finish_reason = engine::FinishReason::stop;
  choices[1].tools_parsed = true;
  choices[1].text = "Hi.";
  choices[1].finish_reason = engine::FinishReason::length;
  choices[2].text = "";  // no parser: content stays a string
  choices[2].finish_reason = engine::FinishReason::stop;
  const Json r = response_json(meta, tok, choices, {3, 4});
  EXPECT_EQ(
      r["choices"][0].dump(),
      R"({"index":0,"message":{"role":"assistant","content":null,"tool_calls":[)"
      R"({"id":"call_a","type":"function","function":{"name":"get_weather",)"
      R"("arguments":"{\"city\":\"Paris\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"})");
  EXPECT_EQ(r["choices"][1].dump(),
            R"({"index":1,"message":{"role":"assistant","content":"Hi."},"logprobs":null,)"
            R"("finish_reason":"length"})");
  EXPECT_EQ(r["choices"][2]["message"]["content"], "");

  EXPECT_EQ(
      tool_call_json({"f", "{}"}, "call_x", 2).dump(),
      R"({"index":2,"id":"call_x","type":"function","function":{"name":"f","arguments":"{}"}})");
  const std::string id = make_tool_call_id();
  ASSERT_EQ(id.size(), 29u);
  EXPECT_EQ(id.substr(0, 5), "call_");
  for (const char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
  EXPECT_NE(make_tool_call_id(), id);
}

}  // namespace
}  // namespace deepinfer::server
