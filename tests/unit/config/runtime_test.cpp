// The shipped configs parse; Runtime starts from a config, refuses a mismatched one before
// loading, and bounds requests; the progress bar's line.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/apply.h"
#include "config/progress.h"
#include "config/runtime.h"
#include "config_test_util.h"
#include "core/log.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;
using testing::expect_config_error;
using testing::repo_root;
using testing::scratch_dir;
using testing::tiny;
using testing::write_file;

TEST(ShippedConfigs, EveryRecipeParses) {
  const fs::path configs = repo_root() / "configs";
  ASSERT_TRUE(fs::is_directory(configs)) << configs;
  int parsed = 0;
  for (const auto& entry : fs::recursive_directory_iterator(configs)) {
    const auto name = entry.path().filename().string();
    const auto ext = entry.path().extension().string();
    if (name != "infer_config.json" && ext != ".yaml" && ext != ".yml") continue;
    SCOPED_TRACE(entry.path().string());
    const RecipeConfig c = load_recipe(entry.path().string());
    EXPECT_TRUE(c.model_path.has());
    // The request defaults and engine options they describe are consistent too.
    sampling_defaults(c, io::GenerationConfig{});
    engine_config(c, io::GenerationConfig{});
    ++parsed;
  }
  for (const char* family : {"deepseek", "qwen", "glm"}) {
    for (const char* file : {"infer_config.json", "ep_config.json", "model_config.json"}) {
      EXPECT_TRUE(fs::exists(configs / family / file)) << family << "/" << file;
    }
  }
  EXPECT_GE(parsed, 5);
}

TEST(ShippedConfigs, TinyRecipeMatchesItsCheckpoint) {
  const RecipeConfig c =
      load_recipe((repo_root() / "configs/tiny-qwen3-moe/infer_config.json").string());
  const std::string dir = resolve_model_path(c);
  check_checkpoint(c, io::ModelConfig::load(dir), dir);
}

RecipeConfig tiny_config(const std::string& model, const nlohmann::json& overrides = {}) {
  RecipeConfig c;
  apply_override(c, "model_path", tiny(model), "test");
  apply_override(c, "threads", 1, "test");
  if (overrides.is_object()) apply_overrides(c, overrides, "test");
  return c;
}

TEST(Runtime, StartsFromAConfigAndBoundsRequests) {
  log::set_level(log::Level::warn);
  RecipeConfig c = tiny_config("tiny-qwen3", {{"max_num_blocks", 8},
                                              {"block_size", 16},
                                              {"max_batch_size", 2},
                                              {"input_truncated_len", 20},
                                              {"max_new_tokens", 30},
                                              {"do_sample", false}});
  const auto rt =
      Runtime::start(c, RuntimeOptions{.warm_up = true, .setup = {.progress_bar = false}});
  EXPECT_EQ(rt->served_name(), "tiny-qwen3");
  EXPECT_EQ(rt->engine().config().max_num_blocks, 8);
  EXPECT_EQ(rt->engine().config().max_num_seqs, 2);
  EXPECT_EQ(rt->engine().config().max_model_len, 50);  // input_truncated_len + max_new_tokens
  EXPECT_EQ(rt->sampling_defaults().temperature, 0.0);
  EXPECT_EQ(rt->sampling_defaults().max_new_tokens, 30);
  EXPECT_EQ(rt->fit_request(10, 30), 30);
  EXPECT_EQ(rt->fit_request(20, 100), 30);      // lowered to fit max_model_len
  EXPECT_THROW(rt->fit_request(21, 5), Error);  // over input_truncated_len

  // Chat: the template's rendering, encoded without adding special tokens again.
  const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "hi"}}};
  const std::string rendered = rt->render_chat(messages);
  EXPECT_NE(rendered.find("hi"), std::string::npos);
  EXPECT_EQ(rt->encode_chat(messages), rt->tokenizer().encode(rendered, false));

  // The client answers (greedy, so twice the same).
  engine::SamplingParams p = rt->sampling_defaults();
  p.max_new_tokens = 4;
  p.ignore_eos = true;
  std::vector<std::vector<int32_t>> outputs;
  for (int i = 0; i < 2; ++i) {
    auto stream = rt->client().submit(rt->encode_prompt("hello"), p);
    std::vector<int32_t> ids;
    while (auto out = stream->next()) {
      for (const auto& d : out->completions)
        ids.insert(ids.end(), d.token_ids.begin(), d.token_ids.end());
    }
    outputs.push_back(ids);
  }
  EXPECT_EQ(outputs[0].size(), 4u);
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST(Runtime, MismatchedConfigIsRefused) {
  RecipeConfig c = tiny_config("tiny-qwen3");
  c.expected.push_back({"num_hidden_layers", 27, "x.json: model.num_hidden_layers"});
  expect_config_error([&] { Runtime::start(c); },
                      {"x.json: model.num_hidden_layers = 27", "num_hidden_layers = 2"});
  RecipeConfig sampled = tiny_config("tiny-qwen3", {{"mem_fraction_static", 1e-9}});
  log::set_level(log::Level::warn);
  expect_config_error(
      [&] {
        Runtime::start(sampled, RuntimeOptions{.warm_up = false, .setup = {.progress_bar = false}});
      },
      {"mem_fraction_static", "leaves no memory for the KV cache"});
}

TEST(Runtime, ModelDirectoryWithoutTokenizerIsRefused) {
  const auto dir = scratch_dir("notok");
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::copy_file(fs::path(tiny("tiny-qwen3")) / file, dir / file);
  }
  RecipeConfig c;
  apply_override(c, "model_path", dir.string(), "test");
  try {
    Runtime::start(c);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
  }
}

TEST(Progress, RendersABar) {
  EXPECT_EQ(ProgressBar::render("loading weights", 1ull << 30, 4ull << 30, 8),
            "[##      ]  25%  1.0/4.0 GiB  loading weights");
  EXPECT_EQ(ProgressBar::render("x", 5, 0, 4), "[####] 100%  0.0/0.0 GiB  x");
  // Pre-faulting reads every file once (no bar: not a terminal / below the threshold).
  EXPECT_EQ(prefault_checkpoint(tiny("tiny-qwen3"), false),
            fs::file_size(fs::path(tiny("tiny-qwen3")) / "model.safetensors"));
}

}  // namespace
}  // namespace deepinfer::config
