// GLM-4 (GlmForCausalLM) and GLM-4-0414 (Glm4ForCausalLM) against transformers:
// tests/data/tiny-glm{,4}/golden.json hold the float32 last-position logits and 32-token greedy
// continuations transformers produced (tools/make_tiny_glm_models.py). Both tiny configs use
// partial rotary with GLM's interleaved pairs, q/k/v bias, the fused gate_up_proj MLP and GLM's
// rms_norm_eps; tiny-glm4 adds the sandwich norms and head_dim != hidden / heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/golden_test_util.h"

namespace deepinfer::model {
namespace {

using namespace testing;

const char* const kModels[] = {"tiny-glm", "tiny-glm4"};

class GlmGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(GlmGolden, F32LogitsAndGreedyMatchTransformersWithOneAndTwoThreads) {
  auto model = load_model(model_dir(GetParam()), {});
  expect_matches_goldens(*model, load_golden(GetParam()), GetParam());
}

// bf16 weights: close to the f32 golden, and tightly equal to transformers run with the same
// bf16-rounded matrices (last_logits_bf16_weights), which pins the bf16 path itself.
TEST_P(GlmGolden, Bf16WeightsMatchTransformersOnRoundedWeights) {
  auto model = load_model(model_dir(GetParam()), LoadOptions{DType::bf16});
  expect_bf16_matches_rounded_goldens(*model, load_golden(GetParam()), GetParam());
}

// Batch invariance: chunked prefill gives bitwise the same logits and continuation.
TEST_P(GlmGolden, ChunkedPrefillIsBitwiseIdentical) {
  auto model = load_model(model_dir(GetParam()), {});
  expect_chunked_prefill_bitwise(*model, load_golden(GetParam()));
}

// GLM-4-9B-chat-hf's config.json is in transformers 4.x spelling (top-level rope_theta and
// partial_rotary_factor); config_v4.json spells the same model that way.
TEST_P(GlmGolden, TransformersV4ConfigComputesTheSameLogits) {
  const std::string source = model_dir(GetParam());
  const ScratchModel v4(source, read_json_file(source + "/config_v4.json"), "v4");
  const auto prompt = longest_prompt(read_json_file(source + "/golden.json"));
  EXPECT_EQ(run_greedy(*load_model(v4.dir(), {}), prompt, 1).logits,
            run_greedy(*load_model(source, {}), prompt, 1).logits);
}

// transformers' GlmConfig / Glm4Config defaults differ from the generic ones for
// partial_rotary_factor (0.5, not 1.0), rms_norm_eps (1.5625e-7), attention_bias (true) and
// num_key_value_heads (2); the tiny configs use exactly those values, so dropping the keys must
// give bitwise the same model (tools/make_tiny_glm_models.py checks transformers agrees).
TEST_P(GlmGolden, AbsentKeysTakeGlmDefaults) {
  const std::string source = model_dir(GetParam());
  auto config = read_json_file(source + "/config.json");
  ASSERT_EQ(config["rope_parameters"]["partial_rotary_factor"].get<double>(), 0.5);
  config["rope_parameters"].erase("partial_rotary_factor");
  for (const char* key : {"rms_norm_eps", "attention_bias", "num_key_value_heads"}) {
    ASSERT_TRUE(config.contains(key)) << key;
    config.erase(key);
  }
  const ScratchModel abridged(source, config, "defaults");
  const auto prompt = longest_prompt(read_json_file(source + "/golden.json"));
  const auto reference = run_greedy(*load_model(source, {}), prompt, 1).logits;
  EXPECT_EQ(run_greedy(*load_model(abridged.dir(), {}), prompt, 1).logits, reference);
  // An explicit full rotary is honoured, i.e. it is a different model.
  config["rope_parameters"]["partial_rotary_factor"] = 1.0;
  const ScratchModel full(source, config, "full_rotary");
  EXPECT_NE(run_greedy(*load_model(full.dir(), {}), prompt, 1).logits, reference);
}

INSTANTIATE_TEST_SUITE_P(Families, GlmGolden, ::testing::ValuesIn(kModels), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

// Glm4 checkpoints carry the sandwich norms; Glm ones must not be read as Glm4 (a missing
// tensor is an error naming it, not silent garbage).
TEST(GlmFamilies, Glm4ArchitectureOnAGlmCheckpointNamesTheMissingNorm) {
  const std::string source = model_dir("tiny-glm");
  auto config = read_json_file(source + "/config.json");
  config["architectures"] = {"Glm4ForCausalLM"};
  const ScratchModel wrong(source, config, "wrong_arch");
  try {
    load_model(wrong.dir(), {});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("post_self_attn_layernorm"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::model
