// A chat request's chat_template_kwargs reach the model's real template: thinking on / off as
// an HTTP body asks for it (the prompts equal transformers' goldens in tests/data/chat).
#include "server/chat_prompt.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/text_file.h"
#include "server/errors.h"
#include "server/json_body.h"

namespace deepinfer::server {
namespace {

namespace fs = std::filesystem;

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

tokenizer::ChatTemplate load_template(const std::string& name) {
  return tokenizer::ChatTemplate::parse(read_text_file(
      (fs::path(DEEPINFER_TEST_DATA_DIR) / "chat" / "templates" / (name + ".jinja")).string()));
}

// The prompt of a one-turn request whose body ends with `extra` (e.g. chat_template_kwargs).
std::string prompt(const tokenizer::ChatTemplate& chat, const std::string& extra) {
  const auto r = parse_chat_request(
      parse_json_body(R"({"messages": [{"role": "user", "content": "hi"}])" + extra + "}"), {});
  return render_chat_prompt(chat, r, kBos, kEos);
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(ChatPrompt, ThinkingSwitchFromChatTemplateKwargs) {
  struct Case {
    const char* name;
    const char* extra;
    const char* tail;
  };
  const Case cases[] = {
      {"glm-4.7", "", "<|user|>hi<|assistant|><think>"},
      {"glm-4.7", R"(, "chat_template_kwargs": {"enable_thinking": true})", "<|assistant|><think>"},
      {"glm-4.7", R"(, "chat_template_kwargs": {"enable_thinking": false})",
       "<|assistant|></think>"},
      {"deepseek-v3.1", "", "<｜User｜>hi<｜Assistant｜></think>"},
      {"deepseek-v3.1", R"(, "chat_template_kwargs": {"thinking": true})",
       "<｜Assistant｜><think>"},
      {"deepseek-v3.1", R"(, "chat_template_kwargs": {"thinking": false})",
       "<｜Assistant｜></think>"},
      {"qwen3", R"(, "chat_template_kwargs": {"enable_thinking": false})",
       "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
      {"qwen3", "", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
      {"minimax-m2", "", "]~b]user\nhi[e~[\n]~b]ai\n<think>\n"},
      {"glm-4.7",
       R"(, "add_generation_prompt": false, "chat_template_kwargs": {"enable_thinking": false})",
       "<|user|>hi"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + c.extra);
    const std::string text = prompt(load_template(c.name), c.extra);
    EXPECT_TRUE(ends_with(text, c.tail)) << text;
  }
}

TEST(ChatPrompt, PastReasoningKeptOnlyWhenTheTemplateIsAskedTo) {
  // An assistant turn's reasoning_content (or vLLM's newer `reasoning`) reaches the template;
  // GLM-4.7 drops it before the last user turn unless clear_thinking is false.
  const auto tpl = load_template("glm-4.7");
  for (const char* field : {"reasoning_content", "reasoning"}) {
    SCOPED_TRACE(field);
    const std::string messages =
        std::string(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", )") +
        R"("content": "a", ")" + field + R"(": "why"}, {"role": "user", "content": "more"}])";
    const auto cleared = parse_chat_request(parse_json_body(messages + "}"), {});
    EXPECT_EQ(render_chat_prompt(tpl, cleared, kBos, kEos),
              "[gMASK]<sop><|user|>q<|assistant|></think>a<|user|>more<|assistant|><think>");
    const auto kept = parse_chat_request(
        parse_json_body(messages + R"(, "chat_template_kwargs": {"clear_thinking": false}})"), {});
    EXPECT_EQ(
        render_chat_prompt(tpl, kept, kBos, kEos),
        "[gMASK]<sop><|user|>q<|assistant|><think>why</think>a<|user|>more<|assistant|><think>");
  }
}

TEST(ChatPrompt, ToolCallArgumentsGoInAsMappingsOrAsSent) {
  const std::string body = R"({"messages": [{"role": "user", "content": "w?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
     "function": {"name": "get_weather", "arguments": "{\"city\": \"北京\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "晴"}],
    "tools": [{"type": "function", "function": {"name": "get_weather"}}]})";
  const auto r = parse_chat_request(parse_json_body(body), {});
  // GLM-4.7 iterates the arguments: they go in as a mapping.
  EXPECT_NE(render_chat_prompt(load_template("glm-4.7"), r, kBos, kEos)
                .find("<tool_call>get_weather<arg_key>city</arg_key><arg_value>北京</arg_value>"
                      "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>"),
            std::string::npos);
  // DeepSeek-V3.1 concatenates them as a string: it gets them as the request sent them.
  EXPECT_NE(render_chat_prompt(load_template("deepseek-v3.1"), r, kBos, kEos)
                .find(R"(get_weather<｜tool▁sep｜>{"city": "北京", "days": 2})"),
            std::string::npos);
}

TEST(ChatPrompt, TemplateErrorsAreBadRequests) {
  const auto r = parse_chat_request(
      parse_json_body(R"({"messages": [{"role": "tool", "content": "orphan"}]})"), {});
  try {
    render_chat_prompt(load_template("minimax-m2"), r, kBos, kEos);
    FAIL() << "expected an ApiError";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("no previous assistant message with a tool call"),
              std::string::npos);
  }
}

// DeepSeek-V3.2 has no Jinja template: its native format takes the same HTTP body, thinking
// switched by chat_template_kwargs as in vLLM, and refuses what its encoder refuses with 400.
TEST(ChatPrompt, DeepSeekV32NativeFormatFromAnHttpBody) {
  const auto chat = tokenizer::ChatTemplate::native("deepseek_v32");
  const std::string tools =
      R"(, "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": )"
      R"({"type": "object", "properties": {"city": {"type": "string"}}}}}])";
  const std::string body =
      R"({"messages": [{"role": "user", "content": "北京?"}, {"role": "assistant", "content": )"
      R"(null, "reasoning_content": "call it", "tool_calls": [{"id": "c1", "type": "function", )"
      R"("function": {"name": "get_weather", "arguments": "{\"city\": \"北京\", \"n\": 2}"}}]}, )"
      R"({"role": "tool", "tool_call_id": "c1", "content": "晴"}])";
  const auto render = [&](const std::string& extra) {
    return render_chat_prompt(chat, parse_chat_request(parse_json_body(body + extra + "}"), {}),
                              kBos, kEos);
  };
  const std::string call =
      "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">北京</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"n\" string=\"false\">2</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜function_calls><｜end▁of▁sentence｜>"
      "\n\n<function_results>\n<result>晴</result>\n</function_results>\n\n";
  const std::string head = "<｜begin▁of▁sentence｜>";
  const std::string tools_prefix = "\n\n## Tools\nYou have access to a set of tools";
  const std::string chat_mode = render(tools);
  EXPECT_EQ(chat_mode.rfind(head, 0), 0u) << chat_mode;
  EXPECT_EQ(chat_mode.find(tools_prefix), head.size()) << chat_mode;
  EXPECT_TRUE(
      ends_with(chat_mode, "<｜User｜>北京?<｜Assistant｜></think>\n\n" + call + "</think>"))
      << chat_mode;
  const std::string thinking = render(tools + R"(, "chat_template_kwargs": {"thinking": true})");
  EXPECT_TRUE(ends_with(
      thinking, "<｜User｜>北京?<｜Assistant｜><think>call it</think>\n\n" + call + "<think>"))
      << thinking;
  EXPECT_TRUE(ends_with(render(R"(, "add_generation_prompt": false)"), "</function_results>"));

  const auto r =
      parse_chat_request(parse_json_body(R"({"messages": [{"role": "user", "content": "q"}, )"
                                         R"({"role": "assistant", "content": "a"}], )"
                                         R"("chat_template_kwargs": {"thinking": true}})"),
                         {});
  try {
    render_chat_prompt(chat, r, kBos, kEos);
    FAIL() << "expected an ApiError";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("needs reasoning_content or tool_calls"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::server
