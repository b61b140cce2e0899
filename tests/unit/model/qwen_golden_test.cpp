// Qwen2 / Qwen3 against transformers: tests/data/tiny-*/golden.json holds the float32
// last-position logits and the 32-token greedy continuation transformers produced
// (tools/make_tiny_models.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "core/text_file.h"
#include "engine/greedy.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"

namespace deepinfer::model {
namespace {

const char* const kModels[] = {"tiny-qwen2", "tiny-qwen3", "tiny-qwen3-yarn", "tiny-qwen2-linear",
                               "tiny-qwen2-llama3"};

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

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

double relative_max_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - ref[i])));
  }
  return diff / max_abs(ref);
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * static_cast<double>(got[i] - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

class QwenGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(QwenGolden, F32LogitsAndGreedyMatchTransformersWithOneAndTwoThreads) {
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

TEST_P(QwenGolden, Bf16WeightsStayWithinTwoPercentRelativeL2) {
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

// Batch invariance: a prompt prefilled in chunks of any size yields bitwise the same logits
// and continuation as one whole-prompt step.
TEST_P(QwenGolden, ChunkedPrefillIsBitwiseIdentical) {
  auto model = load_model(model_dir(GetParam()), {});
  const auto golden = read_json_file(model_dir(GetParam()) + "/golden.json");
  const auto& longest = *std::max_element(
      golden["cases"].begin(), golden["cases"].end(),
      [](const auto& a, const auto& b) { return a["prompt_ids"].size() < b["prompt_ids"].size(); });
  const auto prompt = longest["prompt_ids"].get<std::vector<int32_t>>();
  const GenerationRun whole = run(*model, prompt, 2);
  for (int64_t chunk : {1, 3, 7}) {
    const GenerationRun chunked = run(*model, prompt, 1, chunk);
    EXPECT_EQ(chunked.logits, whole.logits) << "chunk " << chunk;
    EXPECT_EQ(chunked.greedy, whole.greedy) << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, QwenGolden, ::testing::ValuesIn(kModels), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

// Checkpoints stored in bf16 or f16 load (matrices zero-copy) and stay close to the f32 golden.
TEST(QwenCheckpointDtypes, Bf16AndF16StoredCheckpointsLoad) {
  const std::string source = model_dir("tiny-qwen3");
  const io::Checkpoint f32 = io::Checkpoint::open(source);
  const auto golden = read_json_file(source + "/golden.json");
  const auto prompt = golden["cases"][1]["prompt_ids"].get<std::vector<int32_t>>();
  for (DType stored : {DType::bf16, DType::f16}) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("deepinfer_dtype_" + std::string(dtype_name(stored)) + "_" +
                      std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    std::filesystem::create_directories(dir);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& name : f32.names()) tensors.emplace_back(name, f32.get(name).to(stored));
    io::write_safetensors((dir / "model.safetensors").string(), tensors);
    std::filesystem::copy_file(source + "/config.json", dir / "config.json");

    auto stored_model = load_model(dir.string(), {});
    const GenerationRun got = run(*stored_model, prompt, 2);
    EXPECT_LE(relative_l2(got.logits, golden["cases"][1]["last_logits"].get<std::vector<float>>()),
              2e-2)
        << dtype_name(stored);
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace deepinfer::model

namespace deepinfer::model {
namespace {

// The same checkpoints described with transformers 4.x keys (rope_theta + rope_scaling,
// tools/make_tiny_models.py writes config_v4.json) compute bitwise the same logits.
TEST(QwenConfigSpelling, TransformersV4AndV5ConfigsAgree) {
  for (const char* name : kModels) {
    const std::string source = model_dir(name);
    const auto dir = std::filesystem::temp_directory_path() / ("deepinfer_v4_" + std::string(name));
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(source + "/config_v4.json", dir / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(source + "/model.safetensors", dir / "model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    auto v4 = load_model(dir.string(), {});
    auto v5 = load_model(source, {});
    const auto prompt = read_json_file(source + "/golden.json")["cases"][3]["prompt_ids"]
                            .get<std::vector<int32_t>>();
    EXPECT_EQ(run(*v4, prompt, 1).logits, run(*v5, prompt, 1).logits) << name;
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace deepinfer::model
