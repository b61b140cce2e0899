// Reduced-precision KV caches on every family's goldens: next-token logits with a bf16 /
// f16 / int8 cache against the f32 cache and against transformers, for a whole-prompt
// prefill and for token-by-token decoding (chunks of 1: every position then attends to a
// cache written in the reduced type; MLA takes its absorbed path there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "golden_test_util.h"

namespace deepinfer::model::testing {
namespace {

const char* const kFamilies[] = {"tiny-qwen2",
                                 "tiny-qwen3",
                                 "tiny-glm",
                                 "tiny-glm4",
                                 "tiny-deepseek-v3-dense",  // MLA without MoE
                                 "tiny-qwen3-moe",
                                 "tiny-glm4-moe",
                                 "tiny-deepseek-v2",
                                 "tiny-deepseek-v2-lite",
                                 "tiny-deepseek-v3"};

struct RoutedRun {
  std::vector<float> logits;
  std::vector<std::vector<uint64_t>> routing;  // expert load per layer (empty: dense)
};

RoutedRun run(CausalLM& model, const std::vector<int32_t>& prompt, int64_t chunk, DType kv_dtype) {
  model.reset_expert_load();
  RoutedRun r;
  r.logits = run_greedy(model, prompt, 2, chunk, 1, kv_dtype).logits;
  r.routing = model.expert_load();
  return r;
}

// Bounds on the relative L2 of the logits, against the f32 cache's and against transformers'.
// int8 is the acceptance bound; bf16 keeps 8 mantissa bits and f16 11, which the tiny
// random models amplify to ~1 % and ~0.1 % (bf16 weights: up to 2 %).
constexpr double kInt8Bound = 5e-2, kBf16Bound = 3e-2, kF16Bound = 5e-3;
// An int8 group of <= 32 elements errs by ~2x what bf16 does per element (0.4 % vs 0.2 % RMS
// on these caches); where a model amplifies even bf16's perturbation past a quarter of the
// int8 bound (the tiny DeepSeek-V2: 0.4 % in the cache becomes 5.7 % in the logits), int8 is
// held to this multiple of bf16's error instead.
constexpr double kInt8OverBf16 = 4.0;

class KvCacheDtypeGoldens : public ::testing::TestWithParam<const char*> {};

// Every case meets its bound unless the reduced cache changed a routing decision: the tiny
// random MoE checkpoints have near-tied router scores, so any perturbation of the hidden
// state (a bf16 cache as well) can swap an expert of some token's top-k, a discontinuous
// jump of the logits that measures the router's margin, not the cache. Such cases are
// reported; the median over all runs must still meet the bound.
TEST_P(KvCacheDtypeGoldens, LogitsStayCloseToTheF32Cache) {
  const std::string dir = model_dir(GetParam());
  if (!std::filesystem::exists(dir + "/golden.json")) GTEST_SKIP() << dir << " is absent";
  auto model = load_model(dir, {});
  const auto golden = load_golden(GetParam());
  std::map<DType, std::vector<double>> errors;  // vs the f32 cache and vs transformers, per run
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto reference = c["last_logits"].get<std::vector<float>>();
    for (const int64_t chunk : {int64_t{0}, int64_t{1}}) {
      const RoutedRun f32 = run(*model, prompt, chunk, DType::f32);
      std::map<DType, double> vs_f32;
      for (const DType dtype : {DType::bf16, DType::f16, DType::i8}) {
        const RoutedRun got = run(*model, prompt, chunk, dtype);
        const std::string label = std::string(GetParam()) + " " + std::string(dtype_name(dtype)) +
                                  " prompt of " + std::to_string(prompt.size()) + " chunk " +
                                  std::to_string(chunk);
        vs_f32[dtype] = relative_l2(got.logits, f32.logits);
        const double vs_reference = relative_l2(got.logits, reference);
        errors[dtype].push_back(vs_f32[dtype]);
        errors[dtype].push_back(vs_reference);
        // The cache must actually be reduced: some logit moves.
        if (prompt.size() > 1) {
          EXPECT_NE(got.logits, f32.logits) << label;
        }
        if (got.routing != f32.routing) {
          std::printf("%s: routing changed; relative L2 %.4f vs f32, %.4f vs transformers\n",
                      label.c_str(), vs_f32[dtype], vs_reference);
          continue;
        }
        const double bound = dtype == DType::bf16 ? kBf16Bound
                             : dtype == DType::f16
                                 ? kF16Bound
                                 : std::max(kInt8Bound, kInt8OverBf16 * vs_f32[DType::bf16]);
        EXPECT_LE(vs_f32[dtype], bound) << label << " vs the f32 cache";
        EXPECT_LE(vs_reference, bound) << label << " vs transformers";
      }
    }
  }
  for (auto& [dtype, e] : errors) {
    const double bound = dtype == DType::bf16  ? kBf16Bound
                         : dtype == DType::f16 ? kF16Bound
                                               : kInt8Bound;
    std::nth_element(e.begin(), e.begin() + static_cast<int64_t>(e.size() / 2), e.end());
    EXPECT_LE(e[e.size() / 2], bound) << GetParam() << " " << dtype_name(dtype) << ": median";
  }
}

TEST(KvCacheDtypeGoldensRouting, ExpertLoadCountsEveryAssignment) {
  // The routing comparison above relies on expert_load(): tokens x top_k per MoE layer.
  const std::string dir = model_dir("tiny-qwen3-moe");
  if (!std::filesystem::exists(dir + "/golden.json")) GTEST_SKIP() << dir << " is absent";
  auto model = load_model(dir, {});
  const auto prompt = longest_prompt(load_golden("tiny-qwen3-moe"));
  (void)run(*model, prompt, 0, DType::f32);
  const auto load = model->expert_load();
  ASSERT_EQ(static_cast<int64_t>(load.size()), model->config().num_hidden_layers);
  const auto top_k = model->config().raw.at("num_experts_per_tok").get<uint64_t>();
  int moe_layers = 0;
  for (const auto& layer : load) {
    if (layer.empty()) continue;  // mlp_only_layers: dense
    ++moe_layers;
    uint64_t total = 0;
    for (uint64_t n : layer) total += n;
    EXPECT_EQ(total, prompt.size() * top_k);
  }
  EXPECT_EQ(moe_layers, 2);  // of 3 layers, layer 1 is dense (mlp_only_layers)
  model->reset_expert_load();
  for (const auto& layer : model->expert_load())
    for (uint64_t n : layer) EXPECT_EQ(n, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tiny, KvCacheDtypeGoldens, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace deepinfer::model::testing
