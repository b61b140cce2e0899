// validate's comparisons on tiny checkpoints: the model's block outputs reach a ForwardObserver
// without changing the logits, a model matches itself exactly, and the engine matches the
// transformers goldens of tools/dump_reference.py block by block.
#include "validate/validation.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "model/causal_lm.h"

namespace deepinfer::validate {
namespace {

std::string data(const std::string& name) {
  return std::string(DEEPINFER_TEST_DATA_DIR) + "/" + name;
}

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

TEST(ValidateObserver, ReportsEveryBlockInForwardOrderWithoutChangingLogits) {
  auto model = model::load_model(data("tiny-qwen3"), {});
  ModelProbe probe(*model, pool(), DType::f32);
  const std::vector<int32_t> tokens = {3, 14, 15, 92, 65};
  const auto plain = probe.logits(tokens, 5);
  LayerCapture capture;
  const auto watched = probe.logits(tokens, 5, &capture);
  EXPECT_EQ(plain, watched);
  const auto& e = capture.entries();
  const int64_t layers = model->config().num_hidden_layers;
  ASSERT_EQ(static_cast<int64_t>(e.size()), 2 + 5 * layers);
  EXPECT_EQ(e.front().block, "embedding");
  EXPECT_EQ(e[1].block, "input_norm");
  EXPECT_EQ(e[3].block, "post_attention_norm");
  EXPECT_EQ(e[4].block, "mlp");
  EXPECT_EQ(e[5 * layers].block, "layer");
  EXPECT_EQ(e[5 * layers].layer, layers - 1);
  EXPECT_EQ(e.back().block, "final_norm");
  EXPECT_EQ(e.back().data.size(), 5u * static_cast<size_t>(model->config().hidden_size));
}

TEST(ValidateCompare, AModelMatchesItselfExactly) {
  auto a = model::load_model(data("tiny-llama"), {});
  auto b = model::load_model(data("tiny-llama"), {});
  ModelProbe pa(*a, pool(), DType::f32);
  ModelProbe pb(*b, pool(), DType::f32);
  ValidateOptions options;
  options.max_new_tokens = 6;
  options.layers = true;
  options.window = 8;
  const auto prompts = random_prompts(2, 9, a->vocab_size(), 1);
  const std::vector<int32_t> text = random_prompts(1, 30, a->vocab_size(), 2)[0].ids;
  const ValidationReport r = compare_models(pa, pb, prompts, text, options);
  EXPECT_EQ(r.greedy_agreement(), 1.0);
  EXPECT_EQ(r.max_kl, 0.0);
  EXPECT_EQ(r.perplexity_model, r.perplexity_reference);
  EXPECT_EQ(r.perplexity_tokens, 29);
  EXPECT_FALSE(r.first_exceeding.has_value());
  for (const auto& block : r.blocks) EXPECT_EQ(block.rel_error, 0.0) << block.block;
}

class ValidateGoldens : public ::testing::TestWithParam<const char*> {};

TEST_P(ValidateGoldens, EngineMatchesTransformersBlockByBlock) {
  const std::string golden_path = data(std::string("validate/") + GetParam() + ".reference.json");
  if (!std::filesystem::exists(golden_path)) GTEST_SKIP() << golden_path << " is absent";
  const Golden golden = read_golden(golden_path);
  auto model = model::load_model(data(GetParam()), {});
  ModelProbe probe(*model, pool(), DType::f32);
  ValidateOptions options;
  options.layers = true;
  options.tolerance = 1e-4;
  const ValidationReport r = compare_golden(probe, golden, options);
  EXPECT_FALSE(r.first_exceeding.has_value())
      << r.first_exceeding->layer << " " << r.first_exceeding->block << " "
      << r.first_exceeding->rel_error;
  // Every block of the golden was compared (the names agree with transformers' modules).
  EXPECT_EQ(r.blocks.size(), golden.prompts[0].blocks.size());
  EXPECT_EQ(r.top1_agreement(), 1.0);
  EXPECT_LT(r.max_kl, 1e-8);
}

INSTANTIATE_TEST_SUITE_P(Tiny, ValidateGoldens,
                         ::testing::Values("tiny-llama", "tiny-deepseek-v2"));

}  // namespace
}  // namespace deepinfer::validate
