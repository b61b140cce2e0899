// ChatTemplate against goldens rendered by transformers (tools/make_chat_goldens.py): every
// conversation of every real template byte for byte, and transformers' failures as errors.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/text_file.h"
#include "tokenizer/jinja/error.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kChatData = fs::path(DEEPINFER_TEST_DATA_DIR) / "chat";

ordered_json load(const fs::path& path) {
  return ordered_json::parse(read_text_file(path.string()));
}

std::string token(const ordered_json& golden, const char* key) {
  return golden[key].is_null() ? std::string() : golden[key].get<std::string>();
}

void check_golden(const std::string& name) {
  const ordered_json golden = load(kChatData / "goldens" / (name + ".json"));
  const auto tpl = ChatTemplate::parse(
      read_text_file((kChatData / golden["template_file"].get<std::string>()).string()));
  const std::string bos = token(golden, "bos_token");
  const std::string eos = token(golden, "eos_token");
  int rendered = 0;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(name + "/" + c["name"].get<std::string>());
    const ordered_json tools = c.contains("tools") ? c["tools"] : ordered_json(nullptr);
    const ordered_json kwargs = c.contains("kwargs") ? c["kwargs"] : ordered_json::object();
    const bool agp = c.value("add_generation_prompt", false);
    if (c.contains("expected")) {
      EXPECT_EQ(tpl.render(c["messages"], tools, agp, bos, eos, kwargs),
                c["expected"].get<std::string>());
      ++rendered;
    } else {
      // transformers raised: so must we, with a template error (never some text).
      EXPECT_THROW(tpl.render(c["messages"], tools, agp, bos, eos, kwargs), jinja::TemplateError)
          << "transformers: " << c["error"].get<std::string>();
    }
  }
  EXPECT_GE(rendered, 10);
}

TEST(ChatTemplateGolden, DeepSeekV3) {
  check_golden("deepseek-v3");
}
TEST(ChatTemplateGolden, Qwen3) {
  check_golden("qwen3");
}
TEST(ChatTemplateGolden, Qwen25) {
  check_golden("qwen2.5");
}
TEST(ChatTemplateGolden, DeepSeekV2Chat) {
  check_golden("deepseek-v2-chat");
}
TEST(ChatTemplateGolden, DeepSeekV31) {
  check_golden("deepseek-v3.1");
}
TEST(ChatTemplateGolden, Glm4_9bChat) {
  check_golden("glm-4-9b-chat");
}
TEST(ChatTemplateGolden, Glm45) {
  check_golden("glm-4.5");
}
TEST(ChatTemplateGolden, Glm47) {
  check_golden("glm-4.7");
}
TEST(ChatTemplateGolden, MiniMaxM2) {
  check_golden("minimax-m2");
}

// The copies under tests/data are the templates shipped with the shared tokenizers.
TEST(ChatTemplateGolden, CopiesMatchSharedTokenizers) {
  const fs::path shared = fs::path(DEEPINFER_SHARED_DIR) / "tokenizers";
  if (!fs::exists(shared)) GTEST_SKIP() << "no " << shared << " in this checkout";
  for (const char* name : {"deepseek-v3", "qwen3"}) {
    const auto config = TokenizerConfig::load((shared / name / "tokenizer_config.json").string());
    ASSERT_TRUE(config.chat_template.has_value()) << name;
    EXPECT_EQ(*config.chat_template,
              read_text_file((kChatData / "templates" / (std::string(name) + ".jinja")).string()))
        << name;
  }
}

TEST(ChatTemplate, PlainJsonSortsKeysOrderedJsonKeepsThem) {
  // Python dicts keep insertion order; only ordered_json can carry it through.
  const auto tpl = ChatTemplate::parse("{{ messages[0] | tojson }}");
  const std::string text = R"([{"role": "user", "content": "x"}])";
  EXPECT_EQ(tpl.render(ordered_json::parse(text), nullptr, false, "", ""),
            R"({"role": "user", "content": "x"})");
  EXPECT_EQ(tpl.render(nlohmann::json::parse(text), nullptr, false, "", ""),
            R"({"content": "x", "role": "user"})");
}

TEST(ChatTemplate, PreparesInputsLikeTransformers) {
  const auto tpl = ChatTemplate::parse(
      "{% for m in messages %}{{ m | tojson }};{% endfor %}|{{ tools }}|{{ documents }}|"
      "{{ add_generation_prompt }}|{{ bos_token is defined }}|{{ eos_token }}|{{ flag }}");
  const auto messages = ordered_json::parse(R"([
    {"role": "assistant", "content": null, "reasoning": "why", "tool_calls": null},
    {"role": "user", "content": "hi"}])");
  EXPECT_EQ(
      tpl.render(messages, nullptr, true, "", "</s>", ordered_json{{"flag", 1.5}}),
      R"({"thinking": "why", "role": "assistant", "reasoning": "why", "reasoning_content": "why"};)"
      R"({"role": "user", "content": "hi"};|None|None|True|False|</s>|1.5)");
}

TEST(ChatTemplate, RaiseExceptionCarriesTheTemplateMessage) {
  const auto tpl = ChatTemplate::parse(
      "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') "
      "}}{% endif %}ok");
  try {
    tpl.render(ordered_json::parse(R"([{"role": "system", "content": "s"}])"), nullptr, false, "",
               "");
    FAIL() << "expected an exception";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), jinja::ErrorKind::Raised);
    EXPECT_EQ(e.message(), "Conversation must start with user");
    EXPECT_EQ(e.line(), 1);
  }
}

TEST(ChatTemplate, RejectsBadInputs) {
  const auto tpl = ChatTemplate::parse("{{ messages }}");
  EXPECT_THROW(tpl.render(ordered_json::object(), nullptr, false, "", ""), Error);
  EXPECT_THROW(tpl.render(ordered_json::parse("[1]"), nullptr, false, "", ""), Error);
  EXPECT_THROW(tpl.render(ordered_json::array(), ordered_json::parse("[1]"), false, "", ""), Error);
  EXPECT_THROW(
      tpl.render(ordered_json::array(), nullptr, false, "", "", ordered_json{{"messages", 1}}),
      Error);
}

TEST(ChatTemplate, SelectsNamedTemplatesLikeTransformers) {
  TokenizerConfig config;
  EXPECT_THROW(select_chat_template(config, false), Error);
  config.chat_template = "plain";
  EXPECT_EQ(select_chat_template(config, true), "plain");
  config.named_templates = {{"default", "d"}, {"tool_use", "t"}};
  EXPECT_EQ(select_chat_template(config, false), "d");
  EXPECT_EQ(select_chat_template(config, true), "t");
  config.named_templates = {{"rag", "r"}};
  EXPECT_THROW(select_chat_template(config, false), Error);
}

}  // namespace
}  // namespace deepinfer::tokenizer
