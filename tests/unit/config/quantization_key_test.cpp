// The quantization key (--quantization): every spelling maps onto one canonical block type,
// refusals name the key, the value and what this build quantizes to.
#include <gtest/gtest.h>

#include "config/apply.h"
#include "config/recipe_config.h"
#include "config_test_util.h"

namespace deepinfer::config {
namespace {

using testing::expect_config_error;
using testing::parse_infer;

TEST(QuantizationKey, FlagAndFilesGiveTheCanonicalType) {
  RecipeConfig flag;
  apply_override(flag, "quantization", "INT8", "--quantization", true);
  EXPECT_EQ(*flag.quantization, "q8_0");
  EXPECT_EQ(load_options(flag).quantization, DType::q8_0);
  EXPECT_FALSE(load_options(flag).weight_dtype.has_value());

  EXPECT_EQ(*parse_infer(R"({"model": {"quantization": "q4_1"}})").quantization, "q4_1");
  RecipeConfig model_config;
  parse_model_config(model_config, nlohmann::json::parse(R"({"quantization": "q4_0"})"),
                     "x/model_config.json");
  EXPECT_EQ(load_options(model_config).quantization, DType::q4_0);
  RecipeConfig yaml;
  parse_yaml_recipe(yaml, "model_config:\n  quantization: q8_0\n", "x.yaml");
  EXPECT_EQ(*yaml.quantization, "q8_0");

  RecipeConfig none;
  apply_override(none, "quantization", "none", "--quantization", true);
  EXPECT_FALSE(load_options(none).quantization.has_value());
  EXPECT_FALSE(load_options(RecipeConfig{}).quantization.has_value());
}

TEST(QuantizationKey, RefusalsNameTheKeyTheValueAndTheChoices) {
  expect_config_error(
      [] {
        RecipeConfig c;
        apply_override(c, "quantization", "q3_x", "--quantization", true);
      },
      {"--quantization", "q3_x", "unknown weight quantization",
       "q8_0 (alias int8), q4_0, q4_1, q5_0, q5_1"});
  expect_config_error([] { parse_infer(R"({"model": {"quantization": "w4a8"}})"); },
                      {"model.quantization", "w4a8", "not built yet", "q8_0 (alias int8)"});
  // The same type spelled twice agrees; two types conflict.
  RecipeConfig same;
  parse_infer_config(same, nlohmann::json::parse(R"({"model": {"quantization": "int8"}})"),
                     "x/infer_config.json");
  parse_model_config(same, nlohmann::json::parse(R"({"quantization": "q8_0"})"),
                     "x/model_config.json");
  EXPECT_EQ(*same.quantization, "q8_0");
  expect_config_error(
      [] {
        RecipeConfig c;
        parse_infer_config(c, nlohmann::json::parse(R"({"model": {"quantization": "q4_0"}})"),
                           "x/infer_config.json");
        parse_model_config(c, nlohmann::json::parse(R"({"quantization": "q8_0"})"),
                           "x/model_config.json");
      },
      {"conflicting values", "model.quantization", "quantization"});
}

// quantize_lm_head (--quantize-lm-head) rides on the quantization it goes with: refused
// alone and with the types whose kernels run projections only.
TEST(QuantizationKey, QuantizeLmHeadGoesWithABlockQuantization) {
  RecipeConfig flag;
  apply_override(flag, "quantization", "q4_0", "--quantization", true);
  apply_override(flag, "quantize_lm_head", true, "--quantize-lm-head");
  EXPECT_TRUE(load_options(flag).quantization->lm_head);
  EXPECT_FALSE(
      load_options(parse_infer(R"({"model": {"quantization": "q4_0"}})")).quantization->lm_head);
  const RecipeConfig file =
      parse_infer(R"({"model": {"quantization": "int4", "quantize_lm_head": true}})");
  EXPECT_TRUE(load_options(file).quantization->lm_head);
  EXPECT_TRUE(load_options(file).quantization->mix);

  expect_config_error(
      [] {
        RecipeConfig c;
        apply_override(c, "quantize_lm_head", true, "--quantize-lm-head");
        load_options(c);
      },
      {"--quantize-lm-head", "needs quantization"});
  expect_config_error(
      [] {
        load_options(
            parse_infer(R"({"model": {"quantization": "w8a8", "quantize_lm_head": true}})"));
      },
      {"model.quantize_lm_head", "w8a8", "block types"});
  expect_config_error([] { parse_infer(R"({"model": {"quantize_lm_head": "maybe"}})"); },
                      {"model.quantize_lm_head", "maybe"});
}

}  // namespace
}  // namespace deepinfer::config
