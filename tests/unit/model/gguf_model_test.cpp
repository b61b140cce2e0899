// GGUF files written by llama.cpp's own converter (tools/make_gguf_test_models.py) from the
// tiny checkpoints load as those checkpoints: the same config, bitwise the same f32 logits and
// continuations (so the transformers goldens hold for them too), and the same tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "io/hf_config.h"
#include "model/golden_test_util.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::model {
namespace {

using namespace testing;

std::string gguf_path(const std::string& model, const std::string& type) {
  return model_dir("gguf-models/" + model + "-" + type + ".gguf");
}

const char* const kModels[] = {"tiny-qwen2",      "tiny-qwen3",       "tiny-llama",
                               "tiny-llama-bias", "tiny-deepseek-v2", "tiny-deepseek-v2-lite"};

class GgufModel : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufModel, ConfigMatchesTheCheckpointItWasConvertedFrom) {
  const io::ModelConfig hf = io::ModelConfig::load(model_dir(GetParam()));
  const io::ModelConfig gguf = io::ModelConfig::load(gguf_path(GetParam(), "f32"));
  EXPECT_EQ(gguf.architecture, hf.architecture);
  EXPECT_EQ(gguf.vocab_size, hf.vocab_size);
  EXPECT_EQ(gguf.hidden_size, hf.hidden_size);
  EXPECT_EQ(gguf.intermediate_size, hf.intermediate_size);
  EXPECT_EQ(gguf.num_hidden_layers, hf.num_hidden_layers);
  EXPECT_EQ(gguf.num_attention_heads, hf.num_attention_heads);
  EXPECT_EQ(gguf.num_key_value_heads, hf.num_key_value_heads);
  EXPECT_EQ(gguf.head_dim, hf.head_dim);
  EXPECT_EQ(gguf.max_position_embeddings, hf.max_position_embeddings);
  EXPECT_EQ(gguf.rms_norm_eps, hf.rms_norm_eps);  // 1e-06 recovered from the f32 in the file
  EXPECT_EQ(gguf.rope_theta, hf.rope_theta);
  EXPECT_EQ(gguf.rope_scaling.type, hf.rope_scaling.type);
  EXPECT_EQ(gguf.rope_scaling.factor, hf.rope_scaling.factor);
  EXPECT_EQ(gguf.rope_scaling.original_max_position_embeddings,
            hf.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(gguf.rope_scaling.low_freq_factor, hf.rope_scaling.low_freq_factor);
  EXPECT_EQ(gguf.rope_scaling.high_freq_factor, hf.rope_scaling.high_freq_factor);
  if (hf.attention_bias) {
    EXPECT_EQ(gguf.attention_bias, hf.attention_bias);
  }
  EXPECT_EQ(gguf.tie_word_embeddings, hf.tie_word_embeddings);
}

TEST_P(GgufModel, F32FileGivesBitwiseTheCheckpointsLogitsAndGreedy) {
  auto hf = load_model(model_dir(GetParam()), {});
  auto gguf = load_model(gguf_path(GetParam(), "f32"), {});
  const auto golden = load_golden(GetParam());
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun want = run_greedy(*hf, prompt, 2);
    const GenerationRun got = run_greedy(*gguf, prompt, 2);
    EXPECT_EQ(got.logits, want.logits) << GetParam() << " prompt of " << prompt.size();
    EXPECT_EQ(got.greedy, want.greedy) << GetParam() << " prompt of " << prompt.size();
  }
}

TEST_P(GgufModel, TokenizerFromTheFileEncodesAsTokenizerJson) {
  const auto hf = tokenizer::Tokenizer::load_dir(model_dir(GetParam()));
  const auto gguf = tokenizer::Tokenizer::load_dir(gguf_path(GetParam(), "f32"));
  // Already NFC (the tiny tokenizer.json normalizes to NFC; llama.cpp does not normalize).
  for (const std::string text :
       {"Hello world", "The fox said: hello, 12345 times!", "  spaces\n\nand\ttabs  ",
        "<|im_start|>user\nhi<|im_end|>\n", "don't you'll WE'RE", "naïve café — 日本語 😀",
        "x = f(a[1], b) + 3.14159;"}) {
    EXPECT_EQ(gguf.encode(text, true), hf.encode(text, true)) << text;
    const auto ids = hf.encode(text, true);
    EXPECT_EQ(gguf.decode(ids, false), hf.decode(ids, false)) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GgufModel, ::testing::ValuesIn(kModels), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

// DeepSeek-V3 in GGUF: sigmoid routing with its correction bias, q LoRA, MLA. The file keeps
// only mscale_all_dim (llama.cpp takes the rotary mscale to equal it, as every published
// config has it); the tiny checkpoint sets mscale 1.0 apart from it, so the expectation is
// the checkpoint with mscale = mscale_all_dim.
TEST(GgufDeepseekV3, EqualsTheCheckpointWithTheRopeMscaleTheFileCanHold) {
  auto config = read_json_file(model_dir("tiny-deepseek-v3") + "/config.json");
  auto& rope = config["rope_parameters"];
  rope["mscale"] = rope["mscale_all_dim"];
  const ScratchModel scratch(model_dir("tiny-deepseek-v3"), config, "gguf_v3");
  auto hf = load_model(scratch.dir(), {});
  auto gguf = load_model(gguf_path("tiny-deepseek-v3", "f32"), {});
  EXPECT_EQ(gguf->config().architecture, "DeepseekV3ForCausalLM");
  // Named: a range-for over a temporary's ["cases"] reads freed memory (C++20).
  const nlohmann::json golden = load_golden("tiny-deepseek-v3");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun want = run_greedy(*hf, prompt, 2);
    const GenerationRun got = run_greedy(*gguf, prompt, 2);
    EXPECT_EQ(got.logits, want.logits);
    EXPECT_EQ(got.greedy, want.greedy);
  }
}

// Q8_0 blocks, dequantized to f32 at load (--dtype f32), stay close to the transformers
// golden: these random-weight tiny models amplify the weight rounding to 1.3-6.6 % (relative
// L2 of the last-position logits, measured), bound 8 %. The native Q8_0 path is checked in
// model/quantized_weights_test.cpp. (Until the golden was held in a named variable, this loop
// read a destroyed temporary and checked nothing; its old 2 % bound never held.)
TEST(GgufQ8_0, DequantizedStaysWithinEightPercentOfTheGolden) {
  LoadOptions f32;
  f32.weight_dtype = DType::f32;
  auto model = load_model(gguf_path("tiny-qwen2", "q8_0"), f32);
  // Named: a range-for over a temporary's ["cases"] reads freed memory (C++20).
  const nlohmann::json golden = load_golden("tiny-qwen2");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun got = run_greedy(*model, prompt, 2);
    EXPECT_LE(relative_l2(got.logits, c["last_logits"].get<std::vector<float>>()), 8e-2);
  }
}

TEST(GgufModelFile, DirectoryWithOneGgufIsThatFileAndTwoAreRefused) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("deepinfer_gguf_dir_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(gguf_path("tiny-qwen2", "q8_0"), dir / "a.gguf",
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(io::gguf_model_file(dir.string()), (dir / "a.gguf").string());
  EXPECT_EQ(io::ModelConfig::load(dir.string()).architecture, "Qwen2ForCausalLM");
  fs::copy_file(gguf_path("tiny-qwen2", "q8_0"), dir / "b.gguf",
                fs::copy_options::overwrite_existing);
  try {
    io::gguf_model_file(dir.string());
    ADD_FAILURE() << "two .gguf files accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 2 .gguf files"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
  EXPECT_FALSE(io::gguf_model_file(model_dir("tiny-qwen2")).has_value());  // has config.json
}

}  // namespace
}  // namespace deepinfer::model
