// Int8 channel-wise checkpoints as SGLang (w8a8_int8) and compressed-tensors publish them
// (io/w8a8_checkpoint.h): the tiny ones of tools/make_w8a8_checkpoints.py load with their I8
// weights kept zero-copy (the mmap'd bytes themselves) and give the logits of transformers
// running the format's arithmetic (tests/data/tiny-*-int8/golden.json); every other variant of
// quantization_config is refused naming its key.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/text_file.h"
#include "io/safetensors.h"
#include "io/w8a8_checkpoint.h"
#include "model/golden_test_util.h"
#include "model/weights.h"

namespace deepinfer::io {
namespace {

using model::testing::model_dir;

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

ModelConfig config_with(const nlohmann::json& quantization) {
  nlohmann::json raw = read_json_file(model_dir("tiny-qwen2") + "/config.json");
  raw["quantization_config"] = quantization;
  return ModelConfig::parse(raw, "test config.json");
}

nlohmann::json compressed(nlohmann::json weights, nlohmann::json activations) {
  return {
      {"quant_method", "compressed-tensors"},
      {"format", "int-quantized"},
      {"config_groups",
       {{"group_0",
         {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", activations}}}}}};
}

const nlohmann::json kWeights = {{"num_bits", 8},
                                 {"type", "int"},
                                 {"symmetric", true},
                                 {"strategy", "channel"},
                                 {"dynamic", false}};
const nlohmann::json kTokens = {{"num_bits", 8},
                                {"type", "int"},
                                {"symmetric", true},
                                {"strategy", "token"},
                                {"dynamic", true}};

TEST(W8a8Checkpoint, QuantizationConfigsAreRecognizedOrRefusedNamingTheKey) {
  EXPECT_TRUE(parse_w8a8_quantization(config_with({{"quant_method", "w8a8_int8"}}), "c.json"));
  EXPECT_TRUE(parse_w8a8_quantization(config_with(compressed(kWeights, kTokens)), "c.json"));
  EXPECT_FALSE(parse_w8a8_quantization(config_with(nullptr), "c.json"));
  EXPECT_FALSE(parse_w8a8_quantization(config_with({{"quant_method", "fp8"}}), "c.json"));
  const auto with = [](nlohmann::json base, const char* key, nlohmann::json value) {
    base[key] = std::move(value);
    return base;
  };
  const std::pair<nlohmann::json, std::string> bad[] = {
      {{{"quant_method", "w8a8_int8"}, {"activation_scheme", "static"}}, "activation_scheme"},
      {compressed(with(with(kWeights, "strategy", "group"), "group_size", 128), kTokens),
       "config_groups.group_0.weights.strategy"},
      {compressed(with(kWeights, "group_size", 128), kTokens),
       "config_groups.group_0.weights.group_size"},
      {compressed(with(kWeights, "symmetric", false), kTokens),
       "config_groups.group_0.weights.symmetric"},
      {compressed(with(kWeights, "num_bits", 4), kTokens),
       "config_groups.group_0.weights.num_bits"},
      {compressed(kWeights, with(kTokens, "dynamic", false)),
       "config_groups.group_0.input_activations.dynamic"},
      {compressed(kWeights, with(kTokens, "strategy", "tensor")),
       "config_groups.group_0.input_activations.strategy"},
      {compressed(kWeights, with(kTokens, "symmetric", false)),
       "config_groups.group_0.input_activations.symmetric"},
      {compressed(kWeights, nullptr), "config_groups.group_0.input_activations"},
      {with(compressed(kWeights, kTokens), "format", "pack-quantized"), "format"},
      {with(compressed(kWeights, kTokens), "kv_cache_scheme", {{"num_bits", 8}}),
       "kv_cache_scheme"},
  };
  for (const auto& [json, key] : bad) {
    const std::string message =
        error_of([&] { parse_w8a8_quantization(config_with(json), "c.json"); });
    EXPECT_NE(message.find("c.json: quantization_config." + key + ":"), std::string::npos)
        << json.dump() << " -> " << message;
  }
}

// One golden directory: every I8 weight kept (bytes: int8 + an f32 scale per row) but kv_b
// (read by element, widened), and the logits of the format's arithmetic in transformers.
void expect_matches_golden(const std::string& name, double bound) {
  const std::string dir = model_dir(name);
  model::LoadReport report;
  auto model = model::load_model(dir, {}, &report);
  const Checkpoint checkpoint = Checkpoint::open(dir);
  int64_t want = 0;
  for (const std::string& tensor : checkpoint.names()) {
    const TensorInfo& info = checkpoint.info(tensor);
    if (info.dtype != DType::i8 || tensor.find("kv_b_proj") != std::string::npos ||
        tensor.starts_with("model.layers.3."))  // DeepSeek-V3's multi-token prediction: skipped
      continue;
    want += info.shape[0] * info.shape[1] + 4 * info.shape[0];  // int8 + f32 scale per row
  }
  EXPECT_EQ(report.weight_bytes.at("i8"), want);
  const nlohmann::json golden = model::testing::load_golden(name);
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const model::testing::GenerationRun got = model::testing::run_greedy(*model, prompt, 2, 0, 1);
    const double diff =
        model::testing::relative_l2(got.logits, c["last_logits"].get<std::vector<float>>());
    EXPECT_LE(diff, bound) << name << ", prompt of " << prompt.size();
    std::printf("[ measured ] %s prompt of %zu: rel L2 vs transformers W8A8 reference %.3g\n",
                name.c_str(), prompt.size(), diff);
  }
}

TEST(W8a8Checkpoint, SglangW8a8Int8DeepSeekV3MatchesTheFormatsReference) {
  // MLA's q_a / q_b / kv_a / o_proj (kv_b widened), the dense MLP, the shared experts and the
  // routed experts, all int8.
  expect_matches_golden("tiny-deepseek-v3-w8a8-int8", 1e-3);
}

TEST(W8a8Checkpoint, CompressedTensorsInt8Qwen2MatchesTheFormatsReference) {
  expect_matches_golden("tiny-qwen2-compressed-int8", 1e-3);
}

TEST(W8a8Checkpoint, Int8WeightsAreTheMappedBytesAndScalesAreFloat) {
  const Checkpoint checkpoint = Checkpoint::open(model_dir("tiny-qwen2-compressed-int8"));
  model::WeightLoader weights(checkpoint, {});
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  const Tensor w = weights.matrix(name, {64, 64});
  EXPECT_EQ(w.dtype(), DType::i8);
  EXPECT_EQ(w.raw(), checkpoint.get(name).raw());  // zero-copy
  const Tensor& scale = weights.w8a8_scale(name);
  ASSERT_EQ(scale.shape(), Shape({64}));
  // The stored BF16 [64, 1] scale, widened exactly.
  const Tensor stored = checkpoint.get(name + "_scale").to(DType::f32);
  for (int64_t r = 0; r < 64; ++r) EXPECT_EQ(scale.data<float>()[r], stored.data<float>()[r]);
  // --dtype f32 gets the real values q * scale instead.
  model::LoadOptions f32;
  f32.weight_dtype = DType::f32;
  model::WeightLoader widened(checkpoint, f32);
  const Tensor real = widened.matrix(name, {64, 64});
  ASSERT_EQ(real.dtype(), DType::f32);
  EXPECT_EQ(real.data<float>()[64 * 3 + 5],
            static_cast<float>(w.data<int8_t>()[64 * 3 + 5]) * scale.data<float>()[3]);
}

TEST(W8a8Checkpoint, AnI8MatrixWithoutItsScaleNamesTheMissingTensor) {
  const auto dir = std::filesystem::temp_directory_path() / "deepinfer_w8a8_no_scale";
  std::filesystem::create_directories(dir);
  write_safetensors((dir / "model.safetensors").string(),
                    {{"a.weight", Tensor::zeros({4, 6}, DType::i8)},
                     {"b.weight", Tensor::zeros({4, 6}, DType::i8)},
                     {"b.weight_scale", Tensor::zeros({4, 2}, DType::f32)}});
  const Checkpoint checkpoint = Checkpoint::open(dir.string());
  model::WeightLoader weights(checkpoint, {});
  const std::string missing = error_of([&] { weights.matrix("a.weight", {4, 6}); });
  EXPECT_NE(missing.find("'a.weight_scale'"), std::string::npos) << missing;
  const std::string misshaped = error_of([&] { weights.matrix("b.weight", {4, 6}); });
  EXPECT_NE(misshaped.find("'b.weight_scale' has shape [4, 2]"), std::string::npos) << misshaped;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer::io
