// The MoE exchange and expert-load-balancing settings: every spelling (ep_config.json, the
// YAML's force_eplb, flags / keyword arguments, vLLM's --eplb-config) reaches one typed
// parallel::MoeOptions.
#include <gtest/gtest.h>

#include "config/apply.h"
#include "config/recipe_config.h"
#include "config_test_util.h"

namespace deepinfer::config {
namespace {

using testing::expect_config_error;

TEST(MoeOptions, DefaultsKeepEveryAssignmentExactAndBalanceNothing) {
  const parallel::MoeOptions o = moe_options(RecipeConfig{});
  EXPECT_EQ(o.communication_dtype, parallel::CommunicationDType::f32);
  EXPECT_FALSE(o.capacity_factor);
  EXPECT_FALSE(o.eplb.active());
}

TEST(MoeOptions, FlagsAndRecipeKeysReachTheLayers) {
  RecipeConfig c;
  parse_ep_config(c, nlohmann::json::parse(R"({"communication_dtype": "bfloat16",
      "capacity_factor": 1.5})"),
                  "x/ep_config.json");
  apply_overrides(c, nlohmann::json::parse(R"({"num_redundant_experts": 4, "eplb_window": 64,
      "eplb_interval": 16, "eplb_record": "/tmp/x.json"})"),
                  "flags");
  const parallel::MoeOptions o = moe_options(c);
  EXPECT_EQ(o.communication_dtype, parallel::CommunicationDType::bf16);
  EXPECT_DOUBLE_EQ(*o.capacity_factor, 1.5);
  EXPECT_EQ(o.eplb.num_redundant_experts, 4);
  EXPECT_EQ(o.eplb.window, 64);
  EXPECT_EQ(o.eplb.interval, 16);
  EXPECT_EQ(o.eplb.sync_interval(), 16);
  EXPECT_EQ(o.eplb.record_file, "/tmp/x.json");
  EXPECT_TRUE(o.eplb.active());

  RecipeConfig flag;
  apply_override(flag, "communication_dtype", "fp16", "--communication-dtype", true);
  EXPECT_EQ(moe_options(flag).communication_dtype, parallel::CommunicationDType::f16);
  expect_config_error(
      [] {
        RecipeConfig r;
        apply_override(r, "communication_dtype", "int8", "--communication-dtype", true);
      },
      {"--communication-dtype = \"int8\"", "fp16, bf16 or fp32"});
}

TEST(MoeOptions, VllmEplbConfigAndYamlForceEplb) {
  RecipeConfig c;
  apply_override(c, "eplb_config",
                 R"({"window_size": 100, "step_interval": 300, "num_redundant_experts": 2})",
                 "--eplb-config", true);
  const parallel::MoeOptions o = moe_options(c);
  EXPECT_TRUE(o.eplb.enabled);
  EXPECT_EQ(o.eplb.window, 100);
  EXPECT_EQ(o.eplb.interval, 300);
  EXPECT_EQ(o.eplb.num_redundant_experts, 2);
  expect_config_error(
      [] {
        RecipeConfig r;
        apply_override(r, "eplb_config", R"({"window": 1})", "--eplb-config", true);
      },
      {"--eplb-config", "unknown key \"window\""});

  RecipeConfig yaml;
  parse_yaml_recipe(yaml, "model_config:\n  force_eplb: True\n", "r.yaml");
  const parallel::MoeOptions forced = moe_options(yaml);
  EXPECT_TRUE(forced.eplb.enabled);
  EXPECT_EQ(forced.eplb.interval, 3000);  // vLLM's default step interval
  RecipeConfig enabled;
  apply_override(enabled, "enable_eplb", "1", "--enable-eplb", true);
  EXPECT_TRUE(moe_options(enabled).eplb.enabled);

  expect_config_error(
      [] {
        RecipeConfig r;
        apply_override(r, "eplb_load_file", "/nonexistent/load.json", "--eplb-load-file", true);
        moe_options(r);
      },
      {"--eplb-load-file = \"/nonexistent/load.json\": no such file"});
}

}  // namespace
}  // namespace deepinfer::config
