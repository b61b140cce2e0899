// deepinfer render-chat: render a model's chat template for a conversation, exactly as
// transformers' apply_chat_template(tokenize=False) does (or, for DeepSeek-V3.2, which has no
// Jinja template, as its reference encoder does); prints the prompt unchanged.
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/text_file.h"
#include "io/gguf_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer render-chat --model DIR --messages FILE.json [--add-generation-prompt]\n"
    "         [--tools FILE.json] [--template FILE.jinja] [--kwargs JSON]\n"
    "  --model DIR       model directory with tokenizer_config.json (chat template, special "
    "tokens);\n"
    "                    DeepSeek-V3.2 (config.json) without a template: its native format\n"
    "  --messages FILE   JSON array of messages ({\"role\", \"content\", ...})\n"
    "  --tools FILE      JSON array of tool schemas\n"
    "  --template FILE   use this Jinja template instead of the model's\n"
    "  --kwargs JSON     extra template variables, e.g. '{\"enable_thinking\": false}',\n"
    "                    '{\"thinking\": true}' (DeepSeek-V3.1 / V3.2)\n";

nlohmann::ordered_json read_ordered_json(const std::string& path, const char* flag) {
  try {
    return nlohmann::ordered_json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(flag, " ", path, ": malformed JSON: ", e.what());
  }
}

int run_render_chat(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    std::printf("%s", kUsage);
    return 0;
  }
  const Args args(argv, {"model", "messages", "tools", "template", "kwargs"},
                  {"add-generation-prompt"});
  const std::string dir = args.require("model");
  // A GGUF file carries its tokenizer_config (chat template, special tokens) in its metadata.
  const bool gguf = io::gguf_model_file(dir).has_value();
  DI_CHECK(gguf || std::filesystem::is_directory(dir), "--model ", dir,
           ": not a directory or .gguf file");
  const tokenizer::TokenizerConfig config =
      gguf ? tokenizer::Tokenizer::load_dir(dir).config()
           : tokenizer::TokenizerConfig::load(
                 (std::filesystem::path(dir) / "tokenizer_config.json").string());

  const auto messages = read_ordered_json(args.require("messages"), "--messages");
  nlohmann::ordered_json tools = nullptr;
  if (const auto path = args.get("tools")) tools = read_ordered_json(*path, "--tools");
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (const auto text = args.get("kwargs")) {
    try {
      kwargs = nlohmann::ordered_json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      fail("--kwargs: malformed JSON: ", e.what());
    }
    DI_CHECK(kwargs.is_object(),
             "--kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  }

  const auto chat = args.has("template")
                        ? tokenizer::ChatTemplate::parse(read_text_file(*args.get("template")))
                        : tokenizer::load_chat_template(config, !tools.is_null());
  const std::string prompt =
      chat.render(messages, tools, args.flag("add-generation-prompt"),
                  config.bos_token.value_or(""), config.eos_token.value_or(""), kwargs);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

static Registration reg("render-chat",
                        "render a chat template for a conversation (as transformers)",
                        &run_render_chat);

}  // namespace
}  // namespace deepinfer::cli
