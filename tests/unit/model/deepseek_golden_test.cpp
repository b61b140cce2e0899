// DeepSeek-V2 / V3 against transformers: tests/data/tiny-deepseek-*/golden.json holds the float32
// last-position logits and 32-token greedy continuations transformers produced
// (tools/make_tiny_deepseek_models.py). Both MLA forms are checked against them and each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "engine/greedy.h"
#include "io/fp8.h"
#include "io/safetensors.h"
#include "model/arch/deepseek.h"
#include "model/causal_lm.h"
#include "model/golden_test_util.h"

namespace deepinfer::model {
namespace {

const char* const kModels[] = {
    "tiny-deepseek-v2",  "tiny-deepseek-v2-lite", "tiny-deepseek-v3",   "tiny-deepseek-v3-dense",
    "tiny-deepseek-v32", "tiny-glm-moe-dsa",      "tiny-glm4-moe-lite", "tiny-kimi-k25"};

// Builds through build_deepseek to force a form; also asserts every tensor was consumed.
std::unique_ptr<CausalLM> load(const std::string& dir, MlaForm form, LoadOptions options = {}) {
  const io::ModelConfig config = io::ModelConfig::load(dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  WeightLoader weights(checkpoint, options);
  weights.set_fp8(io::parse_fp8_quantization(config, dir + "/config.json"));
  auto model = build_deepseek(config, weights, {form});
  EXPECT_TRUE(weights.unused().empty()) << dir << ": unused " << weights.unused().front();
  return model;
}

using testing::GenerationRun;
using testing::model_dir;
using testing::relative_max_diff;

GenerationRun run(CausalLM& model, const std::vector<int32_t>& prompt, int threads,
                  int64_t chunk = 0) {
  return testing::run_greedy(model, prompt, threads, chunk);
}

nlohmann::json golden_of(const char* name) {
  return testing::load_golden(name);
}

std::vector<int32_t> ids(const nlohmann::json& c, const char* key) {
  return c[key].get<std::vector<int32_t>>();
}

class DeepseekGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(DeepseekGolden, F32LogitsAndGreedyMatchTransformersInEveryFormWithOneAndTwoThreads) {
  const std::string dir = model_dir(GetParam());
  const auto golden = golden_of(GetParam());
  for (MlaForm form : {MlaForm::automatic, MlaForm::expanded, MlaForm::absorbed}) {
    auto model = load(dir, form);
    for (const auto& c : golden["cases"]) {
      const auto prompt = ids(c, "prompt_ids");
      const auto ref_logits = c["last_logits"].get<std::vector<float>>();
      for (int threads : {1, 2}) {
        if (form != MlaForm::automatic && threads == 1) continue;  // forms: 2 threads suffice
        const GenerationRun got = run(*model, prompt, threads);
        ASSERT_EQ(got.logits.size(), ref_logits.size());
        EXPECT_LE(relative_max_diff(got.logits, ref_logits), 1e-4)
            << GetParam() << " form " << static_cast<int>(form) << ", prompt of " << prompt.size()
            << " tokens, " << threads << " threads";
        EXPECT_EQ(got.greedy, ids(c, "greedy_ids"))
            << GetParam() << " form " << static_cast<int>(form) << ", prompt of " << prompt.size()
            << " tokens, " << threads << " threads";
      }
    }
  }
}

// bf16 weights (what published checkpoints store) against transformers with the same
// bf16-rounded weights (router in f32 on both sides): as tight as float32, in both forms,
// which also covers the bf16 W_UK^T copy and the bf16 W_UV row slices of the absorbed form.
TEST_P(DeepseekGolden, Bf16WeightsMatchTransformersWithBf16RoundedWeights) {
  const std::string dir = model_dir(GetParam());
  const auto golden = golden_of(GetParam());
  for (MlaForm form : {MlaForm::expanded, MlaForm::absorbed}) {
    auto model = load(dir, form, LoadOptions{DType::bf16});
    for (const auto& c : golden["cases"]) {
      const auto prompt = ids(c, "prompt_ids");
      const std::vector<float> got = run(*model, prompt, 2).logits;
      EXPECT_LE(relative_max_diff(got, c["bf16_last_logits"].get<std::vector<float>>()), 1e-4)
          << "form " << static_cast<int>(form) << ", prompt of " << prompt.size() << " tokens";
    }
  }
}

// The expanded and absorbed forms are the same function up to rounding.
TEST_P(DeepseekGolden, ExpandedAndAbsorbedFormsAgree) {
  const std::string dir = model_dir(GetParam());
  auto expanded = load(dir, MlaForm::expanded);
  auto absorbed = load(dir, MlaForm::absorbed);
  const auto golden = golden_of(GetParam());
  for (const auto& c : golden["cases"]) {
    const auto prompt = ids(c, "prompt_ids");
    const GenerationRun a = run(*expanded, prompt, 2);
    const GenerationRun b = run(*absorbed, prompt, 2);
    EXPECT_LE(relative_max_diff(b.logits, a.logits), 1e-5) << "prompt of " << prompt.size();
    EXPECT_EQ(a.greedy, b.greedy) << "prompt of " << prompt.size();
  }
}

// With a fixed form a prompt prefilled in chunks gives bitwise the same result as one step;
// with the automatic choice the chunks may take the other form, so only rounding may differ.
TEST_P(DeepseekGolden, ChunkedPrefillMatchesWholePrefill) {
  const auto prompt = testing::longest_prompt(golden_of(GetParam()));
  for (MlaForm form : {MlaForm::expanded, MlaForm::absorbed, MlaForm::automatic}) {
    auto model = load(model_dir(GetParam()), form);
    const GenerationRun whole = run(*model, prompt, 2);
    for (int64_t chunk : {1, 3, 7}) {
      const GenerationRun chunked = run(*model, prompt, 1, chunk);
      if (form == MlaForm::automatic) {
        EXPECT_LE(relative_max_diff(chunked.logits, whole.logits), 1e-5) << "chunk " << chunk;
      } else {
        EXPECT_EQ(chunked.logits, whole.logits)
            << "form " << static_cast<int>(form) << ", chunk " << chunk;
      }
      EXPECT_EQ(chunked.greedy, whole.greedy) << "chunk " << chunk;
    }
  }
}

// Each decode step's logits (absorbed form, one token over the cached latents) equal the
// last-position logits of a fresh prefill of the same prefix (expanded form for long ones).
TEST_P(DeepseekGolden, DecodeStepsMatchFreshPrefills) {
  auto model = load(model_dir(GetParam()), MlaForm::automatic);
  const auto golden = golden_of(GetParam());
  const auto& c = golden["cases"][2];
  std::vector<int32_t> tokens = ids(c, "prompt_ids");
  const auto greedy = ids(c, "greedy_ids");
  ThreadPool pool(2);
  const int64_t total = static_cast<int64_t>(tokens.size() + greedy.size());
  cache::KvCache cache(kv_cache_spec(*model, 16, 2 * ((total + 15) / 16)));
  std::vector<int32_t> table;
  cache.ensure_capacity(table, total);
  const auto vocab = static_cast<size_t>(model->vocab_size());
  std::vector<float> step_logits(vocab);
  std::vector<int32_t> positions(tokens.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(i);
  ForwardBatch batch{tokens,
                     positions,
                     {{0, static_cast<int64_t>(tokens.size()), table}},
                     {static_cast<int64_t>(tokens.size()) - 1}};
  model->forward(batch, cache, step_logits.data(), pool);
  for (size_t k = 0; k < 8; ++k) {
    const int32_t next = greedy[k];
    EXPECT_EQ(engine::argmax(step_logits), next) << "step " << k;
    const int32_t pos = static_cast<int32_t>(tokens.size());
    tokens.push_back(next);
    const int32_t one_token[] = {next};
    const int32_t one_pos[] = {pos};
    ForwardBatch decode{one_token, one_pos, {{0, 1, table}}, {0}};
    model->forward(decode, cache, step_logits.data(), pool);
    const GenerationRun fresh = [&] {
      ThreadPool single(1);
      cache::KvCache fresh_cache(kv_cache_spec(*model, 16, (total + 15) / 16 + 1));
      engine::GreedyOptions options;
      options.max_new_tokens = 1;
      options.ignore_eos = true;
      auto r = engine::greedy_generate(*model, fresh_cache, tokens, options, single);
      return GenerationRun{r.prompt_logits, r.output_ids};
    }();
    EXPECT_LE(relative_max_diff(step_logits, fresh.logits), 1e-5) << "step " << k;
  }
  cache.release(table);
}

TEST_P(DeepseekGolden, KvCacheHoldsOnlyTheLatentAndTheRopeKey) {
  const std::string dir = model_dir(GetParam());
  auto model = load(dir, MlaForm::automatic);
  const auto raw = io::ModelConfig::load(dir).raw;
  const int64_t layers = raw["num_hidden_layers"].get<int64_t>();
  const int64_t width = raw["kv_lora_rank"].get<int64_t>() + raw["qk_rope_head_dim"].get<int64_t>();
  const KvLayout layout = model->kv_layout();
  EXPECT_EQ(layout.num_layers, layers);
  EXPECT_EQ(layout.kv_heads, 1);
  EXPECT_EQ(layout.head_dim, width);
  EXPECT_EQ(layout.v_head_dim, 0);
  // Sparse-attention families add the indexer's key in each layer that runs an indexer.
  const int64_t index_dim = raw.value("index_head_dim", int64_t{0});
  int64_t index_layers = 0;
  if (raw.contains("index_topk")) {
    index_layers = layers;
    if (raw.contains("indexer_types"))
      index_layers = std::count(raw["indexer_types"].begin(), raw["indexer_types"].end(), "full");
  }
  EXPECT_EQ(layout.index_dim, index_layers > 0 ? index_dim : 0);
  const auto spec = kv_cache_spec(*model, 16, 4);
  EXPECT_EQ(spec.bytes_per_token(),
            (layers * width + index_layers * index_dim) * static_cast<int64_t>(sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Families, DeepseekGolden, ::testing::ValuesIn(kModels),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace deepinfer::model
