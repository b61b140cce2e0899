// Qwen2 / Qwen3 against transformers: tests/data/tiny-*/golden.json holds the float32
// last-position logits and the 32-token greedy continuation transformers produced
// (tools/make_tiny_models.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "io/safetensors.h"
#include "model/golden_test_util.h"

namespace deepinfer::model {
namespace {

using namespace testing;

const char* const kModels[] = {"tiny-qwen2", "tiny-qwen3", "tiny-qwen3-yarn", "tiny-qwen2-linear",
                               "tiny-qwen2-llama3"};

class QwenGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(QwenGolden, F32LogitsAndGreedyMatchTransformersWithOneAndTwoThreads) {
  auto model = load_model(model_dir(GetParam()), {});
  expect_matches_goldens(*model, load_golden(GetParam()), GetParam());
}

TEST_P(QwenGolden, Bf16WeightsStayWithinTwoPercentRelativeL2) {
  const std::string dir = model_dir(GetParam());
  auto model = load_model(dir, LoadOptions{DType::bf16});
  const auto golden = read_json_file(dir + "/golden.json");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun got = run_greedy(*model, prompt, 2);
    EXPECT_LE(relative_l2(got.logits, c["last_logits"].get<std::vector<float>>()), 2e-2)
        << GetParam() << " prompt of " << prompt.size() << " tokens";
  }
}

// Batch invariance: a prompt prefilled in chunks of any size yields bitwise the same logits
// and continuation as one whole-prompt step.
TEST_P(QwenGolden, ChunkedPrefillIsBitwiseIdentical) {
  auto model = load_model(model_dir(GetParam()), {});
  expect_chunked_prefill_bitwise(*model, load_golden(GetParam()));
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
    const GenerationRun got = run_greedy(*stored_model, prompt, 2);
    EXPECT_LE(relative_l2(got.logits, golden["cases"][1]["last_logits"].get<std::vector<float>>()),
              2e-2)
        << dtype_name(stored);
  }
}

// The same checkpoints described with transformers 4.x keys (rope_theta + rope_scaling,
// tools/make_tiny_models.py writes config_v4.json) compute bitwise the same logits.
TEST(QwenConfigSpelling, TransformersV4AndV5ConfigsAgree) {
  for (const char* name : kModels) {
    const std::string source = model_dir(name);
    const ScratchModel dir(source, read_json_file(source + "/config_v4.json"), "qwen_v4");
    auto v4 = load_model(dir.dir(), {});
    auto v5 = load_model(source, {});
    const auto prompt = read_json_file(source + "/golden.json")["cases"][3]["prompt_ids"]
                            .get<std::vector<int32_t>>();
    EXPECT_EQ(run_greedy(*v4, prompt, 1).logits, run_greedy(*v5, prompt, 1).logits) << name;
  }
}

}  // namespace
}  // namespace deepinfer::model
