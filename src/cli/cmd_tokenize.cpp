// deepinfer tokenize / detokenize: the Hugging Face tokenizer of a model from the command
// line, with the ids the Python `tokenizers` package gives.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/text_file.h"
#include "io/gguf_model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kTokenizeUsage =
    "usage: deepinfer tokenize (--model DIR | --tokenizer FILE) (--text TEXT | --text-file FILE)\n"
    "         [--add-special-tokens]\n"
    "  --model DIR           directory with tokenizer.json and tokenizer_config.json, or a .gguf\n"
    "  --tokenizer FILE      a tokenizer.json (tokenizer_config.json beside it is used too)\n"
    "  --text TEXT           text to encode (invalid UTF-8 is decoded lossily first)\n"
    "  --text-file FILE      read the text from a file, byte for byte\n"
    "  --add-special-tokens  add BOS/EOS as transformers' tokenizer(text) does\n"
    "prints the ids as a JSON list on one line\n";

constexpr const char* kDetokenizeUsage =
    "usage: deepinfer detokenize (--model DIR | --tokenizer FILE) --ids 1,2,3\n"
    "         [--skip-special-tokens]\n"
    "  --model DIR            directory with tokenizer.json and tokenizer_config.json, or a .gguf\n"
    "  --tokenizer FILE       a tokenizer.json (tokenizer_config.json beside it is used too)\n"
    "  --ids LIST             comma-separated token ids (unknown ids are skipped)\n"
    "  --skip-special-tokens  leave special tokens out of the text\n"
    "prints the text exactly, without a trailing newline\n";

tokenizer::Tokenizer load_tokenizer(const Args& args) {
  const auto model = args.get("model");
  const auto file = args.get("tokenizer");
  DI_CHECK(model.has_value() != file.has_value(),
           "give exactly one of --model DIR or --tokenizer FILE");
  if (model) {
    DI_CHECK(std::filesystem::is_directory(*model) || io::gguf_model_file(*model), "--model ",
             *model, ": not a directory or .gguf file");
    return tokenizer::Tokenizer::load_dir(*model);
  }
  const auto config_path = std::filesystem::path(*file).parent_path() / "tokenizer_config.json";
  return tokenizer::Tokenizer::load(*file, tokenizer::TokenizerConfig::load(config_path.string()));
}

int run_tokenize(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    std::printf("%s", kTokenizeUsage);
    return 0;
  }
  const Args args(argv, {"model", "tokenizer", "text", "text-file"}, {"add-special-tokens"});
  DI_CHECK(args.has("text") != args.has("text-file"),
           "give exactly one of --text TEXT or --text-file FILE");
  const std::string text =
      args.has("text") ? *args.get("text") : read_text_file(*args.get("text-file"));
  const auto tok = load_tokenizer(args);
  const std::string out = nlohmann::json(tok.encode(text, args.flag("add-special-tokens"))).dump();
  std::printf("%s\n", out.c_str());
  return 0;
}

int run_detokenize(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    std::printf("%s", kDetokenizeUsage);
    return 0;
  }
  const Args args(argv, {"model", "tokenizer", "ids"}, {"skip-special-tokens"});
  std::vector<int32_t> ids;
  const std::string list = args.require("ids");
  if (!list.empty()) {
    for (const int64_t id : args.get_int_list("ids")) {
      DI_CHECK(
          id >= std::numeric_limits<int32_t>::min() && id <= std::numeric_limits<int32_t>::max(),
          "--ids: ", id, " is out of range for a token id");
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  const auto tok = load_tokenizer(args);
  const std::string text = tok.decode(ids, args.flag("skip-special-tokens"));
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

static Registration tokenize_reg("tokenize", "encode text to token ids (Hugging Face tokenizer)",
                                 &run_tokenize);
static Registration detokenize_reg("detokenize", "decode token ids to text", &run_detokenize);

}  // namespace
}  // namespace deepinfer::cli
