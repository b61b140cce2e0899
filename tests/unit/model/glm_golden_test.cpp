// GLM-4 (GlmForCausalLM) and GLM-4-0414 (Glm4ForCausalLM) against transformers:
// tests/data/tiny-glm{,4}/golden.json hold the float32 last-position logits and 32-token greedy
// continuations transformers produced (tools/make_tiny_glm_models.py). Both tiny configs use
// partial rotary with GLM's interleaved pairs, q/k/v bias, the fused gate_up_proj MLP and GLM's
// rms_norm_eps; tiny-glm4 adds the sandwich norms and head_dim != hidden / heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/text_file.h"
#include "engine/greedy.h"
#include "model/causal_lm.h"

namespace deepinfer::model {
namespace {

const char* const kModels[] = {"tiny-glm", "tiny-glm4"};

std::string model_dir(const std::string& name) {
  return std::string(DEEPINFER_TEST_DATA_DIR) + "/" + name;
}

struct GenerationRun {
  std::vector<float> logits;
  std::vector<int32_t> greedy;
};

GenerationRun run(CausalLM& model, const std::vector<int32_t>& prompt, int threads,
                  int64_t chunk = 0) {
  ThreadPool pool(threads);
  const int64_t total = static_cast<int64_t>(prompt.size()) + 32;
  cache::KvCache cache(kv_cache_spec(model, 16, (total + 15) / 16));
  engine::GreedyOptions options;
  options.max_new_tokens = 32;
  options.ignore_eos = true;
  options.prefill_chunk = chunk;
  auto result = engine::greedy_generate(model, cache, prompt, options, pool);
  EXPECT_EQ(cache.free_blocks(), cache.spec().num_blocks) << "blocks leaked";
  return {result.prompt_logits, result.output_ids};
}

double relative_max_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - ref[i])));
    scale = std::max(scale, static_cast<double>(std::abs(ref[i])));
  }
  return diff / scale;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * static_cast<double>(got[i] - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

std::vector<int32_t> longest_prompt(const nlohmann::json& golden) {
  const auto& longest = *std::max_element(
      golden["cases"].begin(), golden["cases"].end(),
      [](const auto& a, const auto& b) { return a["prompt_ids"].size() < b["prompt_ids"].size(); });
  return longest["prompt_ids"].get<std::vector<int32_t>>();
}

// A scratch model directory holding `config` and the weights of `source` (per-test name, so
// parallel ctest runs do not collide).
class ScratchModel {
 public:
  ScratchModel(const std::string& source, const nlohmann::json& config, const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() /
             ("deepinfer_glm_" + tag + "_" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()))) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << config.dump(2);
    std::filesystem::copy_file(source + "/model.safetensors", dir_ / "model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
  }
  ~ScratchModel() { std::filesystem::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

class GlmGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(GlmGolden, F32LogitsAndGreedyMatchTransformersWithOneAndTwoThreads) {
  const std::string dir = model_dir(GetParam());
  auto model = load_model(dir, {});
  const auto golden = read_json_file(dir + "/golden.json");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto ref_logits = c["last_logits"].get<std::vector<float>>();
    const auto ref_greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    for (int threads : {1, 2}) {
      const GenerationRun got = run(*model, prompt, threads);
      ASSERT_EQ(got.logits.size(), ref_logits.size());
      EXPECT_LE(relative_max_diff(got.logits, ref_logits), 1e-4)
          << GetParam() << " prompt of " << prompt.size() << " tokens, " << threads << " threads";
      EXPECT_EQ(got.greedy, ref_greedy)
          << GetParam() << " prompt of " << prompt.size() << " tokens, " << threads << " threads";
    }
  }
}

// bf16 weights: close to the f32 golden, and tightly equal to transformers run with the same
// bf16-rounded matrices (last_logits_bf16_weights), which pins the bf16 path itself.
TEST_P(GlmGolden, Bf16WeightsMatchTransformersOnRoundedWeights) {
  const std::string dir = model_dir(GetParam());
  auto model = load_model(dir, LoadOptions{DType::bf16});
  const auto golden = read_json_file(dir + "/golden.json");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun got = run(*model, prompt, 2);
    EXPECT_LE(relative_l2(got.logits, c["last_logits"].get<std::vector<float>>()), 2e-2)
        << GetParam() << " prompt of " << prompt.size() << " tokens";
    EXPECT_LE(
        relative_max_diff(got.logits, c["last_logits_bf16_weights"].get<std::vector<float>>()),
        1e-4)
        << GetParam() << " prompt of " << prompt.size() << " tokens";
  }
}

// Batch invariance: chunked prefill gives bitwise the same logits and continuation.
TEST_P(GlmGolden, ChunkedPrefillIsBitwiseIdentical) {
  auto model = load_model(model_dir(GetParam()), {});
  const auto prompt = longest_prompt(read_json_file(model_dir(GetParam()) + "/golden.json"));
  const GenerationRun whole = run(*model, prompt, 2);
  for (int64_t chunk : {1, 3, 7}) {
    const GenerationRun chunked = run(*model, prompt, 1, chunk);
    EXPECT_EQ(chunked.logits, whole.logits) << "chunk " << chunk;
    EXPECT_EQ(chunked.greedy, whole.greedy) << "chunk " << chunk;
  }
}

// GLM-4-9B-chat-hf's config.json is in transformers 4.x spelling (top-level rope_theta and
// partial_rotary_factor); config_v4.json spells the same model that way.
TEST_P(GlmGolden, TransformersV4ConfigComputesTheSameLogits) {
  const std::string source = model_dir(GetParam());
  const ScratchModel v4(source, read_json_file(source + "/config_v4.json"), "v4");
  const auto prompt = longest_prompt(read_json_file(source + "/golden.json"));
  EXPECT_EQ(run(*load_model(v4.dir(), {}), prompt, 1).logits,
            run(*load_model(source, {}), prompt, 1).logits);
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
  const auto reference = run(*load_model(source, {}), prompt, 1).logits;
  EXPECT_EQ(run(*load_model(abridged.dir(), {}), prompt, 1).logits, reference);
  // An explicit full rotary is honoured, i.e. it is a different model.
  config["rope_parameters"]["partial_rotary_factor"] = 1.0;
  const ScratchModel full(source, config, "full_rotary");
  EXPECT_NE(run(*load_model(full.dir(), {}), prompt, 1).logits, reference);
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
