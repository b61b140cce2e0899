// load_model_setup, the one set-up path of generate, bench, serve, run and Python: settings
// reach the engine options, a bad config loads nothing, the tokenizer is optional on request.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/recipe_config.h"
#include "config/setup.h"
#include "config_test_util.h"
#include "core/log.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;
using testing::expect_config_error;
using testing::scratch_dir;
using testing::tiny;

constexpr SetupOptions kQuiet{.require_tokenizer = true, .progress_bar = false};

TEST(ModelSetup, SettingsReachTheEngineOptionsAndTheLoadedModel) {
  log::set_level(log::Level::warn);
  RecipeConfig c;
  // Flags arrive as text, exactly as `deepinfer serve --block-size 8 ...` passes them.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"model", tiny("tiny-qwen3")},
                                                        {"threads", "2"},
                                                        {"block_size", "8"},
                                                        {"max_num_blocks", "12"},
                                                        {"max_num_seqs", "3"},
                                                        {"kv_cache_dtype", "BF16"},
                                                        {"scheduling_policy", "priority"},
                                                        {"enable_prefix_caching", "1"}}) {
    apply_override(c, key, value, "--" + key, true);
  }
  const ModelSetup s = load_model_setup(c, kQuiet);
  EXPECT_EQ(s.dir, tiny("tiny-qwen3"));
  EXPECT_EQ(s.pool->size(), 2);
  ASSERT_TRUE(s.model);
  ASSERT_TRUE(s.tokenizer.has_value());
  EXPECT_EQ(s.engine.block_size, 8);
  EXPECT_EQ(s.engine.max_num_blocks, 12);
  EXPECT_EQ(s.engine.max_num_seqs, 3);
  EXPECT_EQ(s.engine.kv_cache_dtype, DType::bf16);
  EXPECT_EQ(s.engine.scheduling_policy, engine::SchedulingPolicy::priority);
  EXPECT_TRUE(s.engine.enable_prefix_caching);
  EXPECT_EQ(s.engine.eos_token_ids, s.generation.eos_token_ids);
  EXPECT_FALSE(s.generation.eos_token_ids.empty());
}

TEST(ModelSetup, TokenizerIsOptionalOnlyWhenAskedAndBadConfigsLoadNothing) {
  log::set_level(log::Level::warn);
  const auto dir = scratch_dir("notok");
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::copy_file(fs::path(tiny("tiny-qwen3")) / file, dir / file);
  }
  RecipeConfig c;
  apply_override(c, "model", dir.string(), "--model");
  const ModelSetup ids_only =
      load_model_setup(c, {.require_tokenizer = false, .progress_bar = false});
  EXPECT_TRUE(ids_only.model);
  EXPECT_FALSE(ids_only.tokenizer.has_value());
  try {
    load_model_setup(c, kQuiet);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
  }

  // Checked before any weight is read: conflicting pool sizes and a missing directory.
  RecipeConfig both = c;
  apply_override(both, "max_num_blocks", 4, "--max-num-blocks");
  apply_override(both, "kv_cache_memory", 0.5, "--kv-cache-memory");
  expect_config_error([&] { load_model_setup(both, kQuiet); },
                      {"--max-num-blocks", "--kv-cache-memory", "give one"});
  RecipeConfig missing;
  apply_override(missing, "model", (dir / "nope").string(), "--model");
  expect_config_error([&] { load_model_setup(missing, kQuiet); },
                      {"--model = ", "nope", "not a checkpoint directory"});
  expect_config_error([&] { load_model_setup(RecipeConfig{}, kQuiet); }, {"no model", "--model"});
}

// --tokenizer DIR (vLLM's): the tokenizer of another directory; checked before loading.
TEST(ModelSetup, TokenizerFromAnotherDirectory) {
  log::set_level(log::Level::warn);
  const auto dir = scratch_dir("othertok");
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::copy_file(fs::path(tiny("tiny-qwen3")) / file, dir / file);
  }
  RecipeConfig c;
  apply_override(c, "model", dir.string(), "--model");
  apply_override(c, "tokenizer", tiny("tiny-qwen3"), "--tokenizer");
  const ModelSetup s = load_model_setup(c, kQuiet);
  ASSERT_TRUE(s.tokenizer.has_value());
  EXPECT_EQ(s.tokenizer->encode("hello there", true),
            tokenizer::Tokenizer::load_dir(tiny("tiny-qwen3")).encode("hello there", true));
  RecipeConfig bad = c;
  apply_override(bad, "tokenizer", dir.string(), "--tokenizer");
  expect_config_error([&] { load_model_setup(bad, kQuiet); }, {"--tokenizer", "no tokenizer.json"});
  RecipeConfig no_template = c;
  apply_override(no_template, "chat_template", (dir / "nope.jinja").string(), "--chat-template");
  expect_config_error([&] { load_model_setup(no_template, kQuiet); },
                      {"--chat-template", "nope.jinja", "no such file"});
}

}  // namespace
}  // namespace deepinfer::config
