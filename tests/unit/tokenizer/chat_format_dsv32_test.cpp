// DeepSeek-V3.2's native chat format against goldens of the reference Python encoder
// (tools/make_dsv32_chat_goldens.py): every conversation byte for byte, in chat and thinking
// mode, and the encoder's refusals as errors. Plus how a model directory selects the format.
#include "tokenizer/chat_format_dsv32.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/text_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer_config.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kGolden =
    fs::path(DEEPINFER_TEST_DATA_DIR) / "chat" / "goldens" / "deepseek-v3.2.json";

TEST(ChatFormatDsv32, MatchesTheReferenceEncoder) {
  const ordered_json golden = ordered_json::parse(read_text_file(kGolden.string()));
  const ChatTemplate chat = ChatTemplate::native("deepseek_v32");
  int rendered = 0, refused = 0;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ordered_json tools = c.contains("tools") ? c["tools"] : ordered_json(nullptr);
    const ordered_json kwargs = c.contains("kwargs") ? c["kwargs"] : ordered_json::object();
    const bool agp = c.value("add_generation_prompt", true);
    // BOS / EOS arguments are ignored: the encoder writes its own tokens.
    if (c.contains("expected")) {
      EXPECT_EQ(chat.render(c["messages"], tools, agp, "", "", kwargs),
                c["expected"].get<std::string>());
      ++rendered;
    } else {
      EXPECT_THROW(chat.render(c["messages"], tools, agp, "", "", kwargs), Error)
          << "reference: " << c["error"].get<std::string>();
      ++refused;
    }
  }
  EXPECT_GE(rendered, 50);
  EXPECT_GE(refused, 10);
}

TEST(ChatFormatDsv32, ErrorsNameTheProblem) {
  const auto error = [](const char* messages, const char* kwargs = "{}") {
    try {
      render_deepseek_v32_chat(ordered_json::parse(messages), nullptr, true,
                               ordered_json::parse(kwargs));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(rendered)");
  };
  EXPECT_NE(error(R"([{"role": "robot", "content": "x"}])").find("unknown role 'robot'"),
            std::string::npos);
  EXPECT_NE(error(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])",
                  R"({"thinking": true})")
                .find("needs reasoning_content or tool_calls"),
            std::string::npos);
  EXPECT_NE(error(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                      {"role": "tool", "content": "r"}])")
                .find("no tool calls but found tool output"),
            std::string::npos);
  EXPECT_NE(
      error(R"([{"role": "user", "content": [{"type": "image_url"}]}])").find("only text parts"),
      std::string::npos);
}

TEST(ChatFormatDsv32, ThinkingSwitchIsTruthy) {
  const auto tail = [](const char* kwargs) {
    const std::string p =
        render_deepseek_v32_chat(ordered_json::parse(R"([{"role": "user", "content": "hi"}])"),
                                 nullptr, true, ordered_json::parse(kwargs));
    return p.substr(p.rfind("<｜Assistant｜>"));
  };
  EXPECT_EQ(tail("{}"), "<｜Assistant｜></think>");
  EXPECT_EQ(tail(R"({"thinking": true})"), "<｜Assistant｜><think>");
  EXPECT_EQ(tail(R"({"enable_thinking": true})"), "<｜Assistant｜><think>");
  EXPECT_EQ(tail(R"({"thinking": false, "enable_thinking": true})"), "<｜Assistant｜><think>");
  EXPECT_EQ(tail(R"({"thinking": null})"), "<｜Assistant｜></think>");
  EXPECT_EQ(tail(R"({"thinking": 0})"), "<｜Assistant｜></think>");
}

class ChatFormatDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dsv32_chat_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const char* name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  TokenizerConfig load() {
    return TokenizerConfig::load((dir_ / "tokenizer_config.json").string());
  }
  fs::path dir_;
};

TEST_F(ChatFormatDir, DeepSeekV32WithoutTemplateUsesTheNativeFormat) {
  write("tokenizer_config.json", R"({"bos_token": "<｜begin▁of▁sentence｜>"})");
  write("config.json",
        R"({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32"})");
  const TokenizerConfig config = load();
  ASSERT_EQ(config.chat_format, "deepseek_v32");
  EXPECT_TRUE(has_chat_template(config));
  const ChatTemplate chat = load_chat_template(config, false);
  EXPECT_EQ(chat.native_format(), "deepseek_v32");
  EXPECT_EQ(chat.render(ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), nullptr,
                        true, "", ""),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>");

  write("config.json", R"({"architectures": ["DeepseekV32ForCausalLM"]})");
  EXPECT_EQ(load().chat_format, "deepseek_v32");
  write("config.json", R"({"model_type": "deepseek_v32"})");
  EXPECT_EQ(load().chat_format, "deepseek_v32");
}

TEST_F(ChatFormatDir, AJinjaTemplateOrAnotherModelKeepsJinja) {
  write("tokenizer_config.json", R"({"chat_template": "{{ messages[0].content }}"})");
  write("config.json", R"({"model_type": "deepseek_v32"})");
  TokenizerConfig config = load();
  EXPECT_FALSE(config.chat_format);
  EXPECT_EQ(load_chat_template(config, false).native_format(), "");

  write("tokenizer_config.json", "{}");
  write("config.json",
        R"({"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"]})");
  config = load();
  EXPECT_FALSE(config.chat_format);
  EXPECT_FALSE(has_chat_template(config));
}

}  // namespace
}  // namespace deepinfer::tokenizer
