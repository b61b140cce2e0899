#pragma once
// Shared helpers of the model-family golden tests: run a tiny checkpoint greedily through
// the paged cache and compare with the transformers goldens in tests/data/<model>/golden.json.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "core/tensor.h"
#include "core/text_file.h"
#include "engine/greedy.h"
#include "model/causal_lm.h"

namespace deepinfer::model::testing {

inline std::string model_dir(const std::string& name) {
  return std::string(DEEPINFER_TEST_DATA_DIR) + "/" + name;
}

inline nlohmann::json load_golden(const std::string& name) {
  return read_json_file(model_dir(name) + "/golden.json");
}

struct GenerationRun {
  std::vector<float> logits;    // next-token logits at the last prompt position
  std::vector<int32_t> greedy;  // max_new greedy tokens, EOS ignored
};

// Greedy generation of `max_new` tokens; `chunk` > 0 prefills in chunks of that size.
// `kv_dtype` is the KV cache's storage type.
inline GenerationRun run_greedy(CausalLM& model, const std::vector<int32_t>& prompt, int threads,
                                int64_t chunk = 0, int64_t max_new = 32,
                                DType kv_dtype = DType::f32) {
  ThreadPool pool(threads);
  const int64_t total = static_cast<int64_t>(prompt.size()) + max_new;
  cache::KvCache cache(kv_cache_spec(model, 16, (total + 15) / 16, kv_dtype));
  engine::GreedyOptions options;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  options.prefill_chunk = chunk;
  auto result = engine::greedy_generate(model, cache, prompt, options, pool);
  EXPECT_EQ(cache.free_blocks(), cache.spec().num_blocks) << "blocks leaked";
  return {result.prompt_logits, result.output_ids};
}

// max |got - ref| / max |ref|
inline double relative_max_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - ref[i])));
    scale = std::max(scale, static_cast<double>(std::abs(ref[i])));
  }
  return diff / scale;
}

// ||got - ref||_2 / ||ref||_2
inline double relative_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * static_cast<double>(got[i] - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

inline std::vector<int32_t> longest_prompt(const nlohmann::json& golden) {
  const auto& longest = *std::max_element(
      golden["cases"].begin(), golden["cases"].end(),
      [](const auto& a, const auto& b) { return a["prompt_ids"].size() < b["prompt_ids"].size(); });
  return longest["prompt_ids"].get<std::vector<int32_t>>();
}

// Every golden case: f32 logits within 1e-4 (relative to max |logit|) and the identical
// greedy continuation, with 1 and 2 threads.
inline void expect_matches_goldens(CausalLM& model, const nlohmann::json& golden,
                                   const std::string& label) {
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto ref_logits = c["last_logits"].get<std::vector<float>>();
    const auto ref_greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    for (int threads : {1, 2}) {
      const GenerationRun got = run_greedy(model, prompt, threads);
      ASSERT_EQ(got.logits.size(), ref_logits.size());
      EXPECT_LE(relative_max_diff(got.logits, ref_logits), 1e-4)
          << label << " prompt of " << prompt.size() << " tokens, " << threads << " threads";
      EXPECT_EQ(got.greedy, ref_greedy)
          << label << " prompt of " << prompt.size() << " tokens, " << threads << " threads";
    }
  }
}

// bf16 weights: every case close to the f32 golden (relative L2 <= 2e-2), and within 1e-4 of
// transformers run with the same bf16-rounded matrices (last_logits_bf16_weights), which pins
// the bf16 path itself.
inline void expect_bf16_matches_rounded_goldens(CausalLM& model, const nlohmann::json& golden,
                                                const std::string& label) {
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun got = run_greedy(model, prompt, 2);
    EXPECT_LE(relative_l2(got.logits, c["last_logits"].get<std::vector<float>>()), 2e-2)
        << label << " prompt of " << prompt.size() << " tokens";
    EXPECT_LE(
        relative_max_diff(got.logits, c["last_logits_bf16_weights"].get<std::vector<float>>()),
        1e-4)
        << label << " prompt of " << prompt.size() << " tokens";
  }
}

// Chunked prefill (chunks of 1, 3, 7) gives bitwise the logits and continuation of a
// whole-prompt prefill: the kernels' batch invariance, end to end.
inline void expect_chunked_prefill_bitwise(CausalLM& model, const nlohmann::json& golden) {
  const auto prompt = longest_prompt(golden);
  const GenerationRun whole = run_greedy(model, prompt, 2);
  for (int64_t chunk : {1, 3, 7}) {
    const GenerationRun chunked = run_greedy(model, prompt, 1, chunk);
    EXPECT_EQ(chunked.logits, whole.logits) << "chunk " << chunk;
    EXPECT_EQ(chunked.greedy, whole.greedy) << "chunk " << chunk;
  }
}

// `tensors` copied into one file and mapped back (as a GGUF's tensors are): views whose pages
// can be dropped, so Linear::pack and ExpertStack::repack_blocks repack them where the ISA does.
inline std::vector<Tensor> mapped_copies(const std::vector<Tensor>& tensors,
                                         const std::string& tag) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / str_cat("deepinfer_mapped_", tag, "_", ::getpid());
  {
    std::ofstream out(path, std::ios::binary);
    for (const Tensor& t : tensors)
      out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  }
  const auto file = MappedFile::open(path.string());
  std::filesystem::remove(path);  // the mapping keeps the bytes
  std::vector<Tensor> views;
  size_t at = 0;
  for (const Tensor& t : tensors) {
    views.push_back(
        Tensor::view(Storage::map(file, file->data() + at, t.nbytes()), 0, t.shape(), t.dtype()));
    at += t.nbytes();
  }
  return views;
}

// A scratch model directory holding `config` and the weights of `source`; the name is unique
// per test process so parallel ctest runs do not collide.
class ScratchModel {
 public:
  ScratchModel(const std::string& source, const nlohmann::json& config, const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() /
             ("deepinfer_" + tag + "_" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
              std::to_string(::getpid()))) {
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

}  // namespace deepinfer::model::testing
