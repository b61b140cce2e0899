// FP8 checkpoints kept in memory (no --dtype, no --quantization): the projections and the
// lm_head stay F8_E4M3 with their f32 block scales and run through kernels::linear_fp8. The
// expectation is the dequantize-at-load path (--dtype f32: io/fp8.h's weights in f32, the f32
// kernels), which the kernel's weights equal exactly, so only the summation order differs:
// within 1e-5 of it. The bytes held are the FP8 bytes plus the scales, counted here from the
// checkpoint's own tensor infos.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/fp8_weights.h"
#include "model/golden_test_util.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

using namespace testing;

TEST(Fp8Kept, TinyDeepseekV3EqualsTheDequantizedF32PathWithin1e5) {
  const std::string dir = model_dir("tiny-deepseek-v3-fp8");
  LoadReport kept_report, f32_report;
  auto kept = load_model(dir, {}, &kept_report);
  auto f32 = load_model(dir, LoadOptions{DType::f32}, &f32_report);
  EXPECT_EQ(f32_report.weight_bytes.count("f8_e4m3"), 0u);

  // Kept: every F8_E4M3 matrix (routed experts included) but MLA's kv_b_proj (read by element)
  // and the skipped multi-token-prediction layer 3; each with its f32 `_scale_inv`.
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  int64_t want = 0;
  for (const std::string& name : checkpoint.names()) {
    const io::TensorInfo& info = checkpoint.info(name);
    if (info.dtype != DType::f8_e4m3 || name.find("kv_b_proj") != std::string::npos ||
        name.starts_with("model.layers.3."))
      continue;
    const io::TensorInfo& scale = checkpoint.info(name + "_scale_inv");
    ASSERT_EQ(scale.dtype, DType::f32) << name;
    want += static_cast<int64_t>((info.data_end - info.data_begin) +
                                 (scale.data_end - scale.data_begin));
  }
  ASSERT_GT(want, 0);
  EXPECT_EQ(kept_report.weight_bytes.at("f8_e4m3"), want);

  const nlohmann::json golden = load_golden("tiny-deepseek-v3-fp8");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    for (int threads : {1, 2}) {
      const GenerationRun got = run_greedy(*kept, prompt, threads, 0, 3);
      const GenerationRun ref = run_greedy(*f32, prompt, threads, 0, 3);
      EXPECT_LE(relative_max_diff(got.logits, ref.logits), 1e-5)
          << "prompt of " << prompt.size() << ", " << threads << " threads";
      EXPECT_EQ(got.greedy, ref.greedy) << "prompt of " << prompt.size();
    }
  }
}

// f32 -> E4M3 against core/dtype.h's table of the 254 finite codes: each code's value maps back
// to it, a value halfway between two neighbours goes to the one with the even mantissa, and
// magnitudes above 448 saturate.
TEST(Fp8Encode, EveryFiniteCodeRoundTripsAndTiesGoToEven) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(f32_to_f8_e4m3(f8_e4m3_to_f32(static_cast<uint8_t>(b))), b) << b;
  }
  for (int b = 0; b < 0x7e; ++b) {  // positive neighbours b, b + 1
    const float lo = f8_e4m3_to_f32(static_cast<uint8_t>(b));
    const float hi = f8_e4m3_to_f32(static_cast<uint8_t>(b + 1));
    const int even = (b & 1) == 0 ? b : b + 1;
    EXPECT_EQ(f32_to_f8_e4m3(0.5f * (lo + hi)), even) << b;
    EXPECT_EQ(f32_to_f8_e4m3(-0.5f * (lo + hi)), 0x80 | even) << b;
  }
  EXPECT_EQ(f32_to_f8_e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_f8_e4m3(-500.0f), 0xfe);
}

// --quantization fp8 on a f32 checkpoint: projections in E4M3 with 128x128 block scales (bytes
// counted from the checkpoint's shapes), run by the FP8 kernels, close to the f32 model.
TEST(Fp8Quantize, TinyQwen3ProjectionsBecomeFp8BlocksAndStayClose) {
  const std::string dir = model_dir("tiny-qwen3");
  LoadOptions options;
  options.quantization = parse_quantization("fp8");
  LoadReport report;
  auto fp8 = load_model(dir, options, &report);
  auto f32 = load_model(dir, {});
  EXPECT_NE(report.quantization.find("quantized at load to fp8: 14 matrices"), std::string::npos)
      << report.quantization;
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  int64_t want = 0;
  for (const std::string& name : checkpoint.names()) {
    const io::TensorInfo& info = checkpoint.info(name);
    if (!name.starts_with("model.layers.") || !name.ends_with("_proj.weight")) continue;
    want += info.shape[0] * info.shape[1] +
            4 * ((info.shape[0] + 127) / 128) * ((info.shape[1] + 127) / 128);
  }
  EXPECT_EQ(report.weight_bytes.at("f8_e4m3"), want);
  const nlohmann::json golden = load_golden("tiny-qwen3");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun ref = run_greedy(*f32, prompt, 2, 0, 1);
    const GenerationRun got = run_greedy(*fp8, prompt, 2, 0, 1);
    // E4M3 keeps 3 mantissa bits: measured 7-16 % on this random-weight model.
    EXPECT_LE(relative_l2(got.logits, ref.logits), 0.25) << "prompt of " << prompt.size();
    std::printf("[ measured ] tiny-qwen3 prompt of %zu: rel L2 (fp8 vs f32) %.3g\n", prompt.size(),
                relative_l2(got.logits, ref.logits));
  }
}

}  // namespace
}  // namespace deepinfer::model
