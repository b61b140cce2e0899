// Llama (LlamaForCausalLM) and Mistral (MistralForCausalLM) against transformers:
// tests/data/tiny-{llama,llama-bias,mistral}/golden.json hold the float32 last-position logits,
// the 32-token greedy continuations and the logits on bf16-rounded matrices that transformers
// produced (tools/make_tiny_llama_models.py). tiny-llama: GQA, untied, llama3 rope at theta 5e5;
// tiny-llama-bias: MHA, tied, attention_bias (q/k/v and o_proj) and mlp_bias; tiny-mistral:
// sliding_window null, head_dim != hidden / heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/golden_test_util.h"

namespace deepinfer::model {
namespace {

using namespace testing;

const char* const kModels[] = {"tiny-llama", "tiny-llama-bias", "tiny-mistral"};

class LlamaGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaGolden, F32LogitsAndGreedyMatchTransformersWithOneAndTwoThreads) {
  auto model = load_model(model_dir(GetParam()), {});
  expect_matches_goldens(*model, load_golden(GetParam()), GetParam());
}

// bf16 weights: close to the f32 golden, and tightly equal to transformers run with the same
// bf16-rounded matrices (last_logits_bf16_weights), which pins the bf16 path itself.
TEST_P(LlamaGolden, Bf16WeightsMatchTransformersOnRoundedWeights) {
  auto model = load_model(model_dir(GetParam()), LoadOptions{DType::bf16});
  expect_bf16_matches_rounded_goldens(*model, load_golden(GetParam()), GetParam());
}

// Batch invariance: chunked prefill gives bitwise the same logits and continuation.
TEST_P(LlamaGolden, ChunkedPrefillIsBitwiseIdentical) {
  auto model = load_model(model_dir(GetParam()), {});
  expect_chunked_prefill_bitwise(*model, load_golden(GetParam()));
}

// Published Llama / Mistral checkpoints spell rope in transformers 4.x keys (rope_theta +
// rope_scaling); config_v4.json describes the same model that way.
TEST_P(LlamaGolden, TransformersV4ConfigComputesTheSameLogits) {
  const std::string source = model_dir(GetParam());
  const ScratchModel v4(source, read_json_file(source + "/config_v4.json"), "llama_v4");
  const auto prompt = longest_prompt(load_golden(GetParam()));
  EXPECT_EQ(run_greedy(*load_model(v4.dir(), {}), prompt, 1).logits,
            run_greedy(*load_model(source, {}), prompt, 1).logits);
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaGolden, ::testing::ValuesIn(kModels), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

std::vector<float> longest_prompt_logits(const std::string& dir, const nlohmann::json& golden) {
  return run_greedy(*load_model(dir, {}), longest_prompt(golden), 1, 0, 1).logits;
}

// LlamaConfig defaults attention_bias, mlp_bias to false and head_dim to hidden / heads.
TEST(LlamaConfigDefaults, AbsentBiasAndHeadDimKeysMeanLlamaDefaults) {
  const std::string source = model_dir("tiny-llama");
  auto config = read_json_file(source + "/config.json");
  for (const char* key : {"attention_bias", "mlp_bias", "head_dim"}) {
    ASSERT_TRUE(config.contains(key)) << key;
    config.erase(key);
  }
  const ScratchModel abridged(source, config, "llama_defaults");
  const auto golden = load_golden("tiny-llama");
  EXPECT_EQ(longest_prompt_logits(abridged.dir(), golden), longest_prompt_logits(source, golden));
}

// transformers reads these tiny-mistral configs as the same model (make_tiny_llama_models.py
// checks it): a window as long as the context masks nothing, and Mistral's layers have no
// biases whatever attention_bias / mlp_bias say.
TEST(MistralConfig, FullContextWindowAndLlamaBiasKeysMeanTheSameModel) {
  const std::string source = model_dir("tiny-mistral");
  const auto golden = load_golden("tiny-mistral");
  const auto reference = longest_prompt_logits(source, golden);
  const auto base = read_json_file(source + "/config.json");
  ASSERT_TRUE(base["sliding_window"].is_null());
  for (const nlohmann::json& changes :
       {nlohmann::json{{"sliding_window", 256}},
        nlohmann::json{{"attention_bias", true}, {"mlp_bias", true}}}) {
    auto config = base;
    config.update(changes);
    const ScratchModel changed(source, config, "mistral_same");
    EXPECT_EQ(longest_prompt_logits(changed.dir(), golden), reference) << changes.dump();
  }
}

void expect_load_error(const nlohmann::json& config, const std::string& needle) {
  const ScratchModel dir(model_dir("tiny-mistral"), config, "mistral_window");
  try {
    load_model(dir.dir(), {});
    ADD_FAILURE() << "loaded " << config.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A real sliding window (shorter than the context) would mask keys the engine attends to.
TEST(MistralConfig, ShorterSlidingWindowIsRefusedWithTheKeyNamed) {
  auto config = read_json_file(model_dir("tiny-mistral") + "/config.json");
  config["sliding_window"] = 64;
  expect_load_error(config, "sliding_window: 64 is shorter than max_position_embeddings 256");
}

// MistralConfig's defaults: an absent sliding_window is 4096 (only null means none), an absent
// max_position_embeddings 131072, so a config with neither has a real window.
TEST(MistralConfig, AbsentSlidingWindowIsMistralsDefault4096) {
  auto config = read_json_file(model_dir("tiny-mistral") + "/config.json");
  config.erase("sliding_window");
  config.erase("max_position_embeddings");
  expect_load_error(config,
                    "sliding_window: 4096 (MistralConfig's default, the key is absent) is shorter "
                    "than max_position_embeddings 131072");
}

// MistralConfig's num_key_value_heads default is 8, not num_attention_heads; the tiny model's
// 4 heads cannot be grouped into 8.
TEST(MistralConfig, AbsentKvHeadsIsMistralsDefault8) {
  auto config = read_json_file(model_dir("tiny-mistral") + "/config.json");
  config.erase("num_key_value_heads");
  expect_load_error(config, "num_key_value_heads is absent, so the default 8 applies");
}

}  // namespace
}  // namespace deepinfer::model
