// MiniMax-M2 (MiniMaxM2ForCausalLM) against transformers: tests/data/tiny-minimax-m2/golden.json
// holds the float32 last-position logits and 32-token greedy continuations transformers produced
// (tools/make_tiny_minimax_models.py) on a checkpoint with q/k norms over the whole projection,
// partial rotary, and sigmoid + correction-bias routing in every layer; and the logits of the
// same model with bf16-rounded matrices (router in f32). Configs that ask for what transformers
// does not implement are refused naming the key.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/arch/families.h"
#include "model/causal_lm.h"
#include "model/golden_test_util.h"

namespace deepinfer::model {
namespace {

using namespace testing;

constexpr const char* kModel = "tiny-minimax-m2";

nlohmann::json config_of(const char* file = "config.json") {
  return read_json_file(model_dir(kModel) + "/" + file);
}

TEST(MinimaxM2Golden, F32LogitsAndGreedyMatchTransformersWithOneAndTwoThreads) {
  // Built directly to see that every checkpoint tensor (Mixtral-named experts, the correction
  // bias beside the gate) was consumed.
  const std::string dir = model_dir(kModel);
  const io::ModelConfig config = io::ModelConfig::load(dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  WeightLoader weights(checkpoint, {});
  auto model = build_minimax_m2(config, weights);
  EXPECT_TRUE(weights.unused().empty()) << "unused " << weights.unused().front();
  expect_matches_goldens(*model, load_golden(kModel), kModel);
}

TEST(MinimaxM2Golden, Bf16WeightsMatchTransformersWithBf16RoundedWeights) {
  auto model = load_model(model_dir(kModel), LoadOptions{DType::bf16});
  expect_bf16_matches_rounded_goldens(*model, load_golden(kModel), kModel);
}

TEST(MinimaxM2Golden, ChunkedPrefillIsBitwiseIdentical) {
  auto model = load_model(model_dir(kModel), {});
  expect_chunked_prefill_bitwise(*model, load_golden(kModel));
}

// The published spelling: top-level rope_theta and rotary_dim (no partial_rotary_factor), and
// the keys transformers reads no further (use_qk_norm, qk_norm_type, scoring_func, ...) at the
// values it implements.
TEST(MinimaxM2Config, PublishedSpellingWithRotaryDimComputesTheSameBits) {
  const ScratchModel copy(model_dir(kModel), config_of("config_v4.json"), "minimax_v4");
  const auto prompt = longest_prompt(load_golden(kModel));
  EXPECT_EQ(run_greedy(*load_model(copy.dir(), {}), prompt, 1).logits,
            run_greedy(*load_model(model_dir(kModel), {}), prompt, 1).logits);
}

// Loading `config` (the tiny config edited by `edit`) fails with one message naming `needles`.
void expect_refused(const std::function<void(nlohmann::json&)>& edit,
                    std::initializer_list<const char*> needles) {
  nlohmann::json config = config_of();
  edit(config);
  const ScratchModel copy(model_dir(kModel), config, "minimax_bad");
  try {
    load_model(copy.dir(), {});
    ADD_FAILURE() << "expected an Error for " << config.dump();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const char* needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << needle << " not in: " << message;
  }
}

TEST(MinimaxM2Config, RotaryDimThatDoesNotFitIsRefusedNamingIt) {
  const auto rotary_dim = [](int64_t value) {
    return [value](nlohmann::json& c) {
      c["rope_parameters"].erase("partial_rotary_factor");
      c["rotary_dim"] = value;
    };
  };
  expect_refused(rotary_dim(7), {"rotary_dim", "7"});    // odd
  expect_refused(rotary_dim(32), {"rotary_dim", "32"});  // > head_dim 16
  expect_refused(rotary_dim(0), {"rotary_dim", "0"});
  // Both given and disagreeing (transformers would silently take partial_rotary_factor).
  expect_refused([](nlohmann::json& c) { c["rotary_dim"] = 4; },
                 {"rotary_dim", "4", "partial_rotary_factor"});
}

TEST(MinimaxM2Config, HeadsThatDoNotDivideAreRefusedNamingThem) {
  expect_refused([](nlohmann::json& c) { c["num_key_value_heads"] = 3; },
                 {"num_key_value_heads", "3"});
}

TEST(MinimaxM2Config, ValuesTransformersDoesNotImplementAreRefusedNamingTheKey) {
  expect_refused([](nlohmann::json& c) { c["use_qk_norm"] = false; }, {"use_qk_norm"});
  expect_refused([](nlohmann::json& c) { c["qk_norm_type"] = "per_head"; },
                 {"qk_norm_type", "per_head"});
  expect_refused([](nlohmann::json& c) { c["scoring_func"] = "softmax"; },
                 {"scoring_func", "softmax"});
  expect_refused([](nlohmann::json& c) { c["use_routing_bias"] = false; }, {"use_routing_bias"});
  expect_refused([](nlohmann::json& c) { c["shared_intermediate_size"] = 64; },
                 {"shared_intermediate_size", "64"});
  expect_refused(
      [](nlohmann::json& c) {
        c["attn_type_list"] = {1, 0, 1};
      },
      {"attn_type_list", "0"});
  expect_refused([](nlohmann::json& c) { c["num_experts_per_tok"] = 9; },
                 {"num_experts_per_tok", "9"});
}

}  // namespace
}  // namespace deepinfer::model
