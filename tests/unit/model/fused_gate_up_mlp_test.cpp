// FusedGateUpMlp against a double-precision scalar reference written from transformers'
// GlmMLP: gate, up = (x @ gate_up_proj^T).chunk(2, -1); down_proj(up * silu(gate)).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "io/safetensors.h"
#include "model/layers/fused_gate_up_mlp.h"

namespace deepinfer::model {
namespace {

Tensor random_tensor(Shape shape, std::mt19937& rng, float scale) {
  Tensor t = Tensor::zeros(std::move(shape), DType::f32);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& v : t.span<float>()) v = normal(rng);
  return t;
}

TEST(FusedGateUpMlp, MatchesScalarReferenceForEveryWeightDtype) {
  const int64_t hidden = 24, inter = 40, tokens = 5;
  std::mt19937 rng(7);
  const Tensor gate_up = random_tensor({2 * inter, hidden}, rng, 0.4f);
  const Tensor down = random_tensor({hidden, inter}, rng, 0.3f);
  const Tensor x = random_tensor({tokens, hidden}, rng, 1.0f);

  std::vector<double> want(static_cast<size_t>(tokens * hidden));
  const float* gu = gate_up.data<float>();
  const float* dn = down.data<float>();
  const float* xs = x.data<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> act(static_cast<size_t>(inter));
    for (int64_t j = 0; j < inter; ++j) {
      double g = 0, u = 0;
      for (int64_t k = 0; k < hidden; ++k) {
        g += static_cast<double>(gu[j * hidden + k]) * xs[t * hidden + k];
        u += static_cast<double>(gu[(inter + j) * hidden + k]) * xs[t * hidden + k];
      }
      act[static_cast<size_t>(j)] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int64_t o = 0; o < hidden; ++o) {
      double s = 0;
      for (int64_t j = 0; j < inter; ++j) s += dn[o * inter + j] * act[static_cast<size_t>(j)];
      want[static_cast<size_t>(t * hidden + o)] = s;
    }
  }

  const auto dir =
      std::filesystem::temp_directory_path() /
      ("deepinfer_fused_mlp_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  io::write_safetensors((dir / "model.safetensors").string(),
                        {{"mlp.gate_up_proj.weight", gate_up}, {"mlp.down_proj.weight", down}});
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir.string());
  // bf16 rounding of the weights bounds the error of the reduced-precision runs.
  for (auto [dtype, tolerance] : {std::pair{DType::f32, 1e-5}, std::pair{DType::bf16, 2e-2}}) {
    WeightLoader weights(checkpoint, LoadOptions{dtype});
    const auto mlp = FusedGateUpMlp::load(weights, "mlp", hidden, inter);
    EXPECT_TRUE(weights.unused().empty());
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> got(want.size());
      mlp->forward(xs, tokens, got.data(), pool);
      double diff = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        diff = std::max(diff, std::abs(got[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      EXPECT_LE(diff / scale, tolerance) << dtype_name(dtype) << ", " << threads << " threads";
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer::model
