// Reduced-precision KV caches on every family's goldens: next-token logits with a bf16 /
// f16 / int8 cache against the f32 cache and against transformers, for a whole-prompt
// prefill and for token-by-token decoding (chunks of 1: every position then attends to a
// cache written in the reduced type; MLA takes its absorbed path there).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "golden_test_util.h"

namespace deepinfer::model::testing {
namespace {

struct Family {
  const char* name;
  // Tiny random MoE checkpoints have near-tied router scores: any perturbation of the hidden
  // state (a bf16 cache as well) can swap an expert of the top-k somewhere, a discontinuous
  // jump of the logits that says nothing about the cache. For them the bound holds for the
  // median case and a flipped case may reach kFlipFactor times it.
  bool moe;
};

const Family kFamilies[] = {
    {"tiny-qwen2", false},
    {"tiny-qwen3", false},
    {"tiny-glm", false},
    {"tiny-glm4", false},
    {"tiny-deepseek-v3-dense", false},  // MLA without MoE: the latent cache case by case
    {"tiny-qwen3-moe", true},
    {"tiny-glm4-moe", true},
    {"tiny-deepseek-v2", true},
    {"tiny-deepseek-v2-lite", true},
    {"tiny-deepseek-v3", true}};

constexpr double kFlipFactor = 4.0;

struct Bound {
  DType dtype;
  double rel_l2;  // of the logits, against the f32 cache's and against transformers'
};

// int8: the acceptance bound. bf16 keeps 8 mantissa bits, f16 11: the tiny random
// models amplify them to ~1-2 % and ~0.1-0.3 % of the logits (bf16 weights: up to 2 %).
const Bound kBounds[] = {{DType::i8, 5e-2}, {DType::bf16, 3e-2}, {DType::f16, 5e-3}};

class KvCacheDtypeGoldens : public ::testing::TestWithParam<Family> {};

TEST_P(KvCacheDtypeGoldens, LogitsStayCloseToTheF32Cache) {
  const Family family = GetParam();
  const std::string dir = model_dir(family.name);
  if (!std::filesystem::exists(dir + "/golden.json")) GTEST_SKIP() << dir << " is absent";
  auto model = load_model(dir, {});
  const auto golden = load_golden(family.name);
  for (const Bound& bound : kBounds) {
    std::vector<double> errors;  // against the f32 cache, then against transformers, per run
    for (const auto& c : golden["cases"]) {
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto reference = c["last_logits"].get<std::vector<float>>();
      for (const int64_t chunk : {int64_t{0}, int64_t{1}}) {
        const auto f32 = run_greedy(*model, prompt, 2, chunk, 1, DType::f32).logits;
        const auto got = run_greedy(*model, prompt, 2, chunk, 1, bound.dtype).logits;
        const std::string label = std::string(family.name) + " " +
                                  std::string(dtype_name(bound.dtype)) + " prompt of " +
                                  std::to_string(prompt.size()) + " chunk " + std::to_string(chunk);
        errors.push_back(relative_l2(got, f32));
        errors.push_back(relative_l2(got, reference));
        const double limit = family.moe ? kFlipFactor * bound.rel_l2 : bound.rel_l2;
        EXPECT_LE(errors[errors.size() - 2], limit) << label << " vs the f32 cache";
        EXPECT_LE(errors.back(), limit) << label << " vs transformers";
        // The cache must actually be reduced: some logit moves.
        if (prompt.size() > 1) {
          EXPECT_NE(got, f32) << label;
        }
      }
    }
    std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
    EXPECT_LE(errors[errors.size() / 2], bound.rel_l2)
        << family.name << " " << dtype_name(bound.dtype) << ": median relative L2";
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, KvCacheDtypeGoldens, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace deepinfer::model::testing
