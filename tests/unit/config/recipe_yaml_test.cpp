// The public repository's YAML layout.
#include <gtest/gtest.h>

#include "config/recipe_config.h"
#include "config_test_util.h"

namespace deepinfer::config {
namespace {

using testing::expect_config_error;

RecipeConfig parse(const std::string& text) {
  RecipeConfig c;
  parse_yaml_recipe(c, text, "r.yaml");
  return c;
}

TEST(RecipeYaml, EveryKeyIsMapped) {
  const RecipeConfig c = parse(R"(
model_config:
  model_name: "deepseek_v2_lite"
  model_path: "/data/models/DeepSeek-V2-Lite/"
  with_ckpt: True       # as the public repository writes booleans
  exe_mode: "eager"
  enable_profiler: False
  force_eplb: false
  next_n: 0
data_config:
  dataset: "default"
  input_truncated_len: 32
  temperature: 0.6
  top_p: 0.9
  top_k: 20
parallel_config:
  world_size: 1
  attn_tp_size: 1
  moe_tp_size: 1
  embed_tp_size: 1
  lmhead_tp_size: 1
  dense_tp_size: 1
  o_proj_tp_size: 1
  cp_size: 1
scheduler_config:
  batch_size: 64
  max_new_tokens: 100
  max_prefill_tokens: 1_024
  mem_fraction_static: 0.85
  block_size: 128
)");
  EXPECT_EQ(*c.model_name, "deepseek_v2_lite");
  EXPECT_EQ(*c.model_path, "/data/models/DeepSeek-V2-Lite/");
  EXPECT_EQ(c.model_path.origin, "r.yaml: model_config.model_path");
  EXPECT_EQ(*c.max_prompt_len, 32);
  EXPECT_DOUBLE_EQ(*c.temperature, 0.6);
  EXPECT_DOUBLE_EQ(*c.top_p, 0.9);
  EXPECT_EQ(*c.top_k, 20);
  EXPECT_EQ(*c.world_size, 1);
  EXPECT_EQ(*c.max_num_seqs, 64);
  EXPECT_EQ(c.max_num_seqs.origin, "r.yaml: scheduler_config.batch_size");
  EXPECT_EQ(*c.max_new_tokens, 100);
  EXPECT_EQ(*c.max_num_batched_tokens, 1024);
  EXPECT_DOUBLE_EQ(*c.mem_fraction_static, 0.85);
  EXPECT_EQ(*c.block_size, 128);
}

TEST(RecipeYaml, UnbuiltFeaturesAreRejectedNamingTheKey) {
  expect_config_error([] { parse("model_config:\n  exe_mode: ge_graph\n"); },
                      {"r.yaml: model_config.exe_mode = \"ge_graph\"", "eager only"});
  expect_config_error([] { parse("model_config:\n  next_n: 1\n"); },
                      {"model_config.next_n = 1", "multi-token prediction"});
  expect_config_error([] { parse("model_config:\n  enable_profiler: yes\n"); },
                      {"model_config.enable_profiler = true", "profiler"});
  expect_config_error([] { parse("model_config:\n  with_ckpt: False\n"); },
                      {"model_config.with_ckpt = false", "random weights"});
  expect_config_error([] { parse("data_config:\n  dataset: LongBench\n"); },
                      {"data_config.dataset = \"LongBench\"", "not bundled"});
  // world_size, attn_tp_size and moe_tp_size are read (set-up derives the layout); the
  // separate splits of embeddings, lm_head, dense layers, o_proj and context are not built.
  const RecipeConfig layout =
      parse("parallel_config:\n  world_size: 8\n  attn_tp_size: 2\n  moe_tp_size: 1\n");
  EXPECT_EQ(*layout.world_size, 8);
  EXPECT_EQ(*layout.attn_tp_size, 2);
  EXPECT_EQ(*layout.moe_tp_size, 1);
  for (const char* key :
       {"embed_tp_size", "lmhead_tp_size", "dense_tp_size", "o_proj_tp_size", "cp_size"}) {
    expect_config_error([&] { parse(str_cat("parallel_config:\n  ", key, ": 2\n")); },
                        {str_cat("parallel_config.", key, " = 2"), "not built", "set it to 1"});
  }
  expect_config_error([] { parse("scheduler_config:\n  mem_fraction_static: 1.5\n"); },
                      {"mem_fraction_static = 1.5", "(0, 1]"});
}

TEST(RecipeYaml, UnknownKeysAndSectionsAreRejected) {
  expect_config_error([] { parse("model_config:\n  custom_params:\n    a: 1\n"); },
                      {"r.yaml", "unknown key 'model_config.custom_params'", "exe_mode"});
  expect_config_error([] { parse("runtime_config:\n  x: 1\n"); },
                      {"unknown section 'runtime_config'", "model_config, data_config"});
  // A key one level too high is told where it belongs.
  expect_config_error([] { parse("batch_size: 4\n"); },
                      {"unknown section 'batch_size'", "a key of the section scheduler_config"});
  expect_config_error([] { parse("model_config: [1, 2]\n"); }, {"model_config must be an object"});
  expect_config_error([] { parse("- a\n- b\n"); }, {"expected a YAML mapping"});
}

TEST(RecipeYaml, ScalarsAreTypedLikePyYaml) {
  // Quoted numbers stay strings (and so are wrong for an integer key).
  expect_config_error([] { parse("scheduler_config:\n  block_size: \"16\"\n"); },
                      {"scheduler_config.block_size", "expected an integer", "string"});
  expect_config_error([] { parse("scheduler_config:\n  block_size: 16.0\n"); },
                      {"expected an integer"});
  EXPECT_EQ(*parse("data_config:\n  top_k: -1\n").top_k, -1);
  EXPECT_DOUBLE_EQ(*parse("data_config:\n  temperature: 1e-1\n").temperature, 0.1);
  EXPECT_FALSE(parse("data_config:\n  temperature: ~\n").temperature.has());
  expect_config_error([] { parse("model_config:\n  model_name: 12\n"); }, {"expected a string"});
}

TEST(RecipeYaml, MalformedYamlGivesTheLine) {
  expect_config_error([] { parse("model_config:\n  model_name: [unclosed\n"); },
                      {"r.yaml: malformed YAML at line"});
  expect_config_error([] { parse("model_config:\n  next_n: 0\n  next_n: 0\n"); },
                      {"appears twice"});
}

}  // namespace
}  // namespace deepinfer::config
