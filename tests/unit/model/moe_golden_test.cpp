// Qwen3-MoE and GLM-4.5 (Glm4Moe) against transformers: tests/data/tiny-{qwen3,glm4}-moe/
// golden.json holds the float32 last-position logits and 32-token greedy continuations
// transformers produced (tools/make_tiny_moe_models.py), on checkpoints with dense and MoE
// layers, group-limited biased routing and shared experts (GLM-4.5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/text_file.h"
#include "engine/greedy.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"

namespace deepinfer::model {
namespace {

const char* const kModels[] = {"tiny-qwen3-moe", "tiny-glm4-moe"};

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
  return {result.prompt_logits, result.output_ids};
}

double relative_max_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - ref[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::abs(ref[i])));
  }
  return diff / max_ref;
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

// A copy of a tiny checkpoint in a temp dir with config.json edited by `edit` and extra
// tensors appended; removed on destruction.
class EditedCheckpoint {
 public:
  EditedCheckpoint(const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                   const std::vector<std::pair<std::string, Tensor>>& extra = {}) {
    const std::string source = model_dir(name);
    dir_ = std::filesystem::temp_directory_path() /
           ("deepinfer_moe_" + name + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    nlohmann::json config = read_json_file(source + "/config.json");
    edit(config);
    std::ofstream(dir_ / "config.json") << config.dump(2);
    const io::Checkpoint original = io::Checkpoint::open(source);
    std::vector<std::pair<std::string, Tensor>> tensors = extra;
    for (const auto& n : original.names()) tensors.emplace_back(n, original.get(n));
    io::write_safetensors((dir_ / "model.safetensors").string(), tensors);
  }
  ~EditedCheckpoint() { std::filesystem::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

class MoeGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeGolden, F32LogitsAndGreedyMatchTransformersWithOneAndTwoThreads) {
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

// Expert and attention matrices in bf16 (the router stays f32).
TEST_P(MoeGolden, Bf16WeightsStayWithinTwoPercentRelativeL2) {
  const std::string dir = model_dir(GetParam());
  auto model = load_model(dir, LoadOptions{DType::bf16});
  const auto golden = read_json_file(dir + "/golden.json");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun got = run(*model, prompt, 2);
    EXPECT_LE(relative_l2(got.logits, c["last_logits"].get<std::vector<float>>()), 2e-2)
        << GetParam() << " prompt of " << prompt.size() << " tokens";
  }
}

// Batch invariance through the MoE: prefill in chunks of any size gives bitwise the same
// logits and continuation as one whole-prompt step.
TEST_P(MoeGolden, ChunkedPrefillIsBitwiseIdentical) {
  auto model = load_model(model_dir(GetParam()), {});
  const auto prompt = longest_prompt(read_json_file(model_dir(GetParam()) + "/golden.json"));
  const GenerationRun whole = run(*model, prompt, 2);
  for (int64_t chunk : {1, 3, 7}) {
    const GenerationRun chunked = run(*model, prompt, 1, chunk);
    EXPECT_EQ(chunked.logits, whole.logits) << "chunk " << chunk;
    EXPECT_EQ(chunked.greedy, whole.greedy) << "chunk " << chunk;
  }
}

// transformers 4.x spelling of the same config (rope_theta + rope_scaling, torch_dtype).
TEST_P(MoeGolden, TransformersV4ConfigComputesTheSameBits) {
  const std::string source = model_dir(GetParam());
  const auto v4 = read_json_file(source + "/config_v4.json");
  EditedCheckpoint copy(GetParam(), [&](nlohmann::json& config) { config = v4; });
  const auto prompt = longest_prompt(read_json_file(source + "/golden.json"));
  EXPECT_EQ(run(*load_model(copy.dir(), {}), prompt, 1).logits,
            run(*load_model(source, {}), prompt, 1).logits);
}

INSTANTIATE_TEST_SUITE_P(Families, MoeGolden, ::testing::ValuesIn(kModels), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

// Published Qwen3-MoE checkpoints say "num_experts"; transformers 5 writes
// "num_local_experts". Both mean the same model.
TEST(Qwen3MoeConfig, NumExpertsSpellingsAgree) {
  EditedCheckpoint copy("tiny-qwen3-moe", [](nlohmann::json& config) {
    config["num_experts"] = config["num_local_experts"];
    config.erase("num_local_experts");
  });
  const auto prompt = longest_prompt(read_json_file(model_dir("tiny-qwen3-moe") + "/golden.json"));
  EXPECT_EQ(run(*load_model(copy.dir(), {}), prompt, 1).logits,
            run(*load_model(model_dir("tiny-qwen3-moe"), {}), prompt, 1).logits);
}

TEST(Qwen3MoeConfig, SlidingWindowIsRejected) {
  EditedCheckpoint copy("tiny-qwen3-moe",
                        [](nlohmann::json& config) { config["use_sliding_window"] = true; });
  EXPECT_THROW(load_model(copy.dir(), {}), Error);
}

// GLM-4.5 config.json without partial_rotary_factor means 0.5 (Glm4MoeConfig's default), and
// the multi-token-prediction layer stored after the last decoder layer (model.layers.N.*,
// with num_nextn_predict_layers = 1) is skipped, not an error.
TEST(Glm4MoeConfig, DefaultPartialRotaryAndMtpLayerTensors) {
  Tensor eh_proj = Tensor::zeros({64, 128}, DType::f32);
  Tensor enorm = Tensor::zeros({64}, DType::f32);
  EditedCheckpoint copy(
      "tiny-glm4-moe",
      [](nlohmann::json& config) { config["rope_parameters"].erase("partial_rotary_factor"); },
      {{"model.layers.3.eh_proj.weight", eh_proj}, {"model.layers.3.enorm.weight", enorm}});
  const auto prompt = longest_prompt(read_json_file(model_dir("tiny-glm4-moe") + "/golden.json"));
  EXPECT_EQ(run(*load_model(copy.dir(), {}), prompt, 1).logits,
            run(*load_model(model_dir("tiny-glm4-moe"), {}), prompt, 1).logits);
}

TEST(Glm4MoeConfig, InconsistentGroupSettingsAreRejected) {
  EditedCheckpoint copy("tiny-glm4-moe", [](nlohmann::json& config) { config["n_group"] = 3; });
  try {
    load_model(copy.dir(), {});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_group"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::model
