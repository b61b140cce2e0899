#include "model/layers/rotary_embedding.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/text_file.h"

namespace deepinfer::model {
namespace {

// Expected values: transformers' ROPE_INIT_FUNCTIONS (tools/make_rope_goldens.py).
TEST(RotaryEmbedding, MatchesTransformersForEveryRopeType) {
  const auto goldens = read_json_file(DEEPINFER_TEST_DATA_DIR "/rope_goldens.json");
  for (const auto& c : goldens["cases"]) {
    io::ModelConfig config;
    config.rope_theta = c["rope_theta"].get<double>();
    config.max_position_embeddings = c["max_position_embeddings"].get<int64_t>();
    const auto& scaling = c["rope_scaling"];
    if (!scaling.is_null()) {
      config.rope_scaling.type = scaling["rope_type"].get<std::string>();
      config.rope_scaling.factor = scaling["factor"].get<double>();
      config.rope_scaling.original_max_position_embeddings =
          scaling.value("original_max_position_embeddings", int64_t{0});
      config.rope_scaling.mscale = scaling.value("mscale", 1.0);
      config.rope_scaling.mscale_all_dim = scaling.value("mscale_all_dim", 0.0);
      config.rope_scaling.low_freq_factor = scaling.value("low_freq_factor", 1.0);
      config.rope_scaling.high_freq_factor = scaling.value("high_freq_factor", 4.0);
    }
    const RotaryEmbedding rope(config, c["head_dim"].get<int64_t>());
    const auto expected = c["inv_freq"].get<std::vector<float>>();
    ASSERT_EQ(rope.inv_freq().size(), expected.size()) << c["name"];
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(rope.inv_freq()[i], expected[i], 2e-6f * std::abs(expected[i]) + 1e-12f)
          << c["name"] << " i=" << i;
    }
    EXPECT_NEAR(rope.attention_scaling(), c["attention_factor"].get<float>(), 1e-6f) << c["name"];
  }
}

TEST(RotaryEmbedding, TablesScaleCosAndSinByTheAttentionFactor) {
  io::ModelConfig config;
  config.rope_theta = 10000.0;
  config.max_position_embeddings = 256;
  config.rope_scaling.type = "yarn";
  config.rope_scaling.factor = 4.0;
  config.rope_scaling.original_max_position_embeddings = 64;
  const RotaryEmbedding rope(config, 8);
  const int32_t positions[] = {0, 5};
  float cos[8], sin[8];
  rope.compute(positions, 2, cos, sin);
  const float s = rope.attention_scaling();
  EXPECT_NEAR(s, 0.1f * std::log(4.0f) + 1.0f, 1e-6f);
  EXPECT_FLOAT_EQ(cos[0], s);
  EXPECT_FLOAT_EQ(sin[0], 0.0f);
  for (int i = 0; i < 4; ++i) {
    const float angle = 5.0f * rope.inv_freq()[static_cast<size_t>(i)];
    EXPECT_NEAR(cos[4 + i], std::cos(angle) * s, 1e-6f);
    EXPECT_NEAR(sin[4 + i], std::sin(angle) * s, 1e-6f);
  }
}

TEST(RotaryEmbedding, RejectsUnsupportedTypesByName) {
  io::ModelConfig config;
  config.rope_scaling.type = "dynamic";
  try {
    RotaryEmbedding rope(config, 8);
    FAIL() << "dynamic rope must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'dynamic'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::model
