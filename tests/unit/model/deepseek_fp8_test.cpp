// FP8 block-quantized checkpoints (DeepSeek-V3 / R1 format) and DeepSeek-V3's MTP layers:
// dequantization by hand-checked values, config parsing and loader errors, the
// tiny-deepseek-v3-fp8 golden (transformers on the dequantized weights), MTP tensors skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/text_file.h"
#include "engine/greedy.h"
#include "io/fp8.h"
#include "io/safetensors.h"
#include "model/arch/deepseek.h"
#include "model/causal_lm.h"
#include "model/golden_test_util.h"

namespace deepinfer::model {
namespace {

std::string data_dir(const std::string& name) {
  return testing::model_dir(name);
}

std::filesystem::path temp_dir(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("deepinfer_fp8_" + tag + "_" +
                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                    std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

io::ModelConfig config_with(const nlohmann::json& quantization) {
  nlohmann::json raw = read_json_file(data_dir("tiny-deepseek-v3-fp8") + "/config.json");
  raw["quantization_config"] = quantization;
  return io::ModelConfig::parse(raw, "test config.json");
}

TEST(Fp8Blocks, DequantizesHandCheckedValuesWithPartialEdgeBlocks) {
  // e4m3 codes: 0x38 = 1.0, 0x40 = 2.0, 0xC0 = -2.0, 0x7E = 448 (max), 0x01 = 2^-9, 0x34 = 0.75.
  const uint8_t codes[] = {0x38, 0x40, 0xC0, 0x7E, 0x01, 0x34};
  const float values[] = {1.0f, 2.0f, -2.0f, 448.0f, 0.001953125f, 0.75f};
  // A 5 x 7 matrix in 2 x 3 blocks: scales [3, 3], the last block row and column partial.
  Tensor weight = Tensor::zeros({5, 7}, DType::f8_e4m3);
  Tensor scale = Tensor::zeros({3, 3}, DType::f32);
  auto* q = static_cast<uint8_t*>(weight.raw());
  for (int i = 0; i < 35; ++i) q[i] = codes[(i * 5 + 1) % 6];
  for (int i = 0; i < 9; ++i) scale.data<float>()[i] = 0.5f + 0.25f * static_cast<float>(i);
  const io::Fp8BlockQuantization quant{2, 3};
  EXPECT_EQ(io::fp8_scale_shape(weight.shape(), quant), (Shape{3, 3}));
  const Tensor f32 = io::dequantize_fp8_blocks(weight, scale, quant, DType::f32);
  const Tensor bf16 = io::dequantize_fp8_blocks(weight, scale, quant, DType::bf16);
  ASSERT_EQ(f32.shape(), weight.shape());
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 7; ++c) {
      const float want =
          values[((r * 7 + c) * 5 + 1) % 6] * scale.data<float>()[(r / 2) * 3 + c / 3];
      EXPECT_EQ(f32.data<float>()[r * 7 + c], want) << r << ", " << c;
      EXPECT_EQ(static_cast<const uint16_t*>(bf16.raw())[r * 7 + c], f32_to_bf16(want));
    }
  }
  EXPECT_NE(error_of([&] { io::dequantize_fp8_blocks(weight, scale, {2, 2}, DType::f32); }), "");
}

TEST(Fp8Blocks, QuantizationConfigIsParsedOrRejectedWithItsKey) {
  const auto cfg = io::parse_fp8_quantization(config_with({{"quant_method", "fp8"},
                                                           {"fmt", "e4m3"},
                                                           {"activation_scheme", "dynamic"},
                                                           {"weight_block_size", {128, 64}}}),
                                              "c.json");
  ASSERT_TRUE(cfg.has_value());
  EXPECT_EQ(cfg->block_rows, 128);
  EXPECT_EQ(cfg->block_cols, 64);
  EXPECT_FALSE(io::parse_fp8_quantization(config_with(nullptr), "c.json").has_value());
  const std::pair<nlohmann::json, const char*> bad[] = {
      {{{"quant_method", "gptq"}, {"bits", 4}}, "quant_method"},
      {{{"quant_method", "fp8"},
        {"activation_scheme", "static"},
        {"weight_block_size", {128, 128}}},
       "activation_scheme"},
      {{{"quant_method", "fp8"}}, "weight_block_size"},
      {{{"quant_method", "fp8"}, {"weight_block_size", {128}}}, "weight_block_size"},
      {{{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}}, "fmt"},
  };
  for (const auto& [json, key] : bad) {
    const std::string message =
        error_of([&] { io::parse_fp8_quantization(config_with(json), "c.json"); });
    EXPECT_NE(message.find(std::string("quantization_config.") + key), std::string::npos)
        << json.dump() << " -> " << message;
  }
}

TEST(Fp8Blocks, LoaderNamesTheTensorWhenScalesAreMissingOrMisshaped) {
  const auto dir = temp_dir("loader");
  Tensor w = Tensor::zeros({4, 6}, DType::f8_e4m3);
  io::write_safetensors((dir / "model.safetensors").string(),
                        {{"a.weight", w},
                         {"b.weight", w},
                         {"b.weight_scale_inv", Tensor::zeros({1, 1}, DType::f32)}});
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir.string());
  WeightLoader plain(checkpoint, {});
  EXPECT_NE(error_of([&] {
              plain.matrix("a.weight", {4, 6});
            }).find("quantization_config"),
            std::string::npos);
  WeightLoader quantized(checkpoint, {});
  quantized.set_fp8(io::Fp8BlockQuantization{2, 3});
  EXPECT_NE(error_of([&] {
              quantized.matrix("a.weight", {4, 6});
            }).find("a.weight_scale_inv"),
            std::string::npos);
  const std::string misshaped = error_of([&] { quantized.matrix("b.weight", {4, 6}); });
  EXPECT_NE(misshaped.find("b.weight_scale_inv"), std::string::npos) << misshaped;
  EXPECT_NE(misshaped.find("[2, 2]"), std::string::npos) << misshaped;
  std::filesystem::remove_all(dir);
}

using testing::relative_max_diff;

testing::GenerationRun run(CausalLM& model, const std::vector<int32_t>& prompt, int threads) {
  return testing::run_greedy(model, prompt, threads);
}

// Loaded the ordinary way (registry: quantization_config from config.json), dequantized to f32
// the model is the one transformers ran on the dequantized weights.
TEST(DeepseekFp8Golden, F32DequantizedMatchesTransformersWithOneAndTwoThreads) {
  const std::string dir = data_dir("tiny-deepseek-v3-fp8");
  ASSERT_EQ(
      io::Checkpoint::open(dir).info("model.layers.0.self_attn.kv_a_proj_with_mqa.weight").dtype,
      DType::f8_e4m3);
  auto model = load_model(dir, LoadOptions{DType::f32});
  const auto golden = read_json_file(dir + "/golden.json");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    for (int threads : {1, 2}) {
      const testing::GenerationRun got = run(*model, prompt, threads);
      EXPECT_LE(relative_max_diff(got.logits, c["last_logits"].get<std::vector<float>>()), 1e-4)
          << "prompt of " << prompt.size() << " tokens, " << threads << " threads";
      EXPECT_EQ(got.greedy, c["greedy_ids"].get<std::vector<int32_t>>())
          << "prompt of " << prompt.size() << " tokens, " << threads << " threads";
    }
  }
}

// Without --dtype, FP8 projections stay FP8 with their block scales (fp8_kept_test.cpp runs
// them); --dtype dequantizes them at load. With every matrix in bf16 the model is transformers'
// with the dequantized weights rounded once to bf16.
TEST(DeepseekFp8Golden, Bf16DequantizationMatchesTransformersBf16) {
  const std::string dir = data_dir("tiny-deepseek-v3-fp8");
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  const io::ModelConfig config = io::ModelConfig::load(dir);
  const std::string name = "model.layers.0.self_attn.q_b_proj.weight";
  const Shape shape = checkpoint.info(name).shape;
  for (const auto& [options, want] :
       {std::pair{LoadOptions{}, DType::f8_e4m3}, std::pair{LoadOptions{DType::f32}, DType::f32},
        std::pair{LoadOptions{DType::f16}, DType::f16}}) {
    WeightLoader weights(checkpoint, options);
    weights.set_fp8(io::parse_fp8_quantization(config, dir));
    EXPECT_EQ(weights.matrix(name, shape).dtype(), want);
  }

  auto model = load_model(dir, LoadOptions{DType::bf16});
  const auto golden = read_json_file(dir + "/golden.json");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_LE(relative_max_diff(run(*model, prompt, 2).logits,
                                c["bf16_last_logits"].get<std::vector<float>>()),
              1e-4)
        << "prompt of " << prompt.size() << " tokens";
  }
}

// tiny-deepseek-v3 stores one MTP layer (model.layers.3.*: a decoder layer plus enorm, hnorm,
// eh_proj, embed_tokens, shared_head) as the published V3 checkpoints do (layer 61). It is
// skipped, consumed, and changes nothing; declared away (num_nextn_predict_layers 0) its
// tensors are reported as unused instead.
TEST(DeepseekMtp, MtpLayerTensorsAreSkippedCleanly) {
  const std::string dir = data_dir("tiny-deepseek-v3");
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  int64_t mtp_tensors = 0;
  for (const auto& name : checkpoint.names()) mtp_tensors += name.rfind("model.layers.3.", 0) == 0;
  ASSERT_GT(mtp_tensors, 20);
  ASSERT_TRUE(checkpoint.contains("model.layers.3.eh_proj.weight"));

  io::ModelConfig config = io::ModelConfig::load(dir);
  ASSERT_EQ(config.raw["num_nextn_predict_layers"], 1);
  WeightLoader weights(checkpoint, {});
  auto model = build_deepseek(config, weights, {});
  EXPECT_TRUE(weights.unused().empty());

  config.raw["num_nextn_predict_layers"] = 0;
  WeightLoader undeclared(checkpoint, {});
  auto same = build_deepseek(config, undeclared, {});
  EXPECT_EQ(static_cast<int64_t>(undeclared.unused().size()), mtp_tensors);
  const auto prompt =
      read_json_file(dir + "/golden.json")["cases"][1]["prompt_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(run(*model, prompt, 1).logits, run(*same, prompt, 1).logits);
}

TEST(DeepseekConfig, UnsupportedSettingsAreRejectedByKey) {
  const std::string dir = data_dir("tiny-deepseek-v2");
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  const nlohmann::json base = read_json_file(dir + "/config.json");
  const nlohmann::json v3 = read_json_file(data_dir("tiny-deepseek-v3") + "/config.json");
  const std::tuple<nlohmann::json, const char*, nlohmann::json, const char*> cases[] = {
      {base, "num_key_value_heads", 2, "num_key_value_heads"},
      {base, "norm_topk_prob", true, "norm_topk_prob"},
      {base, "topk_method", "noaux_tc", "topk_method"},
      {base, "scoring_func", "sigmoid", "scoring_func"},
      {base, "hidden_act", "gelu", "hidden_act"},
      {v3, "topk_method", "greedy", "topk_method"},
      {v3, "scoring_func", "softmax", "scoring_func"},
  };
  for (const auto& [original, key, value, expected] : cases) {
    nlohmann::json raw = original;
    raw[key] = value;
    const std::string message = error_of([&] {
      const io::ModelConfig config = io::ModelConfig::parse(raw, "test config.json");
      WeightLoader weights(checkpoint, {});
      build_deepseek(config, weights, {});
    });
    EXPECT_NE(message.find(expected), std::string::npos) << key << " -> " << message;
  }
}

}  // namespace
}  // namespace deepinfer::model
