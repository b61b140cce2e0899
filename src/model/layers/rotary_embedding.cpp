#include "model/layers/rotary_embedding.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace deepinfer::model {
namespace {

// transformers computes these in float32 torch ops; mirror the float32 rounding.
std::vector<float> default_inv_freq(double base, int64_t dim) {
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos_freq = std::pow(static_cast<float>(base), exponent);
    inv[static_cast<size_t>(i)] = 1.0f / pos_freq;
  }
  return inv;
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

float yarn(const io::ModelConfig& config, int64_t dim, std::vector<float>& inv) {
  const auto& rope = config.rope_scaling;
  const double base = config.rope_theta;
  const double original = rope.original_max_position_embeddings > 0
                              ? static_cast<double>(rope.original_max_position_embeddings)
                              : static_cast<double>(config.max_position_embeddings);
  const double factor = rope.factor;
  double attention_factor;
  if (rope.attention_factor) {
    attention_factor = *rope.attention_factor;
  } else if (rope.mscale != 0.0 && rope.mscale_all_dim != 0.0) {
    attention_factor = yarn_mscale(factor, rope.mscale) / yarn_mscale(factor, rope.mscale_all_dim);
  } else {
    attention_factor = yarn_mscale(factor, 1.0);
  }
  const double beta_fast = rope.beta_fast != 0.0 ? rope.beta_fast : 32.0;
  const double beta_slow = rope.beta_slow != 0.0 ? rope.beta_slow : 1.0;
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(original / (rotations * 2 * std::numbers::pi))) /
           (2 * std::log(base));
  };
  double low = correction_dim(beta_fast);
  double high = correction_dim(beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  const std::vector<float> extrapolation = default_inv_freq(base, dim);
  for (size_t i = 0; i < inv.size(); ++i) {
    const float ramp =
        std::clamp(static_cast<float>((static_cast<float>(i) - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float pos_freq =
        std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(dim));
    const float interpolation = 1.0f / (static_cast<float>(factor) * pos_freq);
    inv[i] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation[i] * extrapolation_factor;
  }
  return static_cast<float>(attention_factor);
}

void llama3(const io::RopeScaling& rope, std::vector<float>& inv) {
  DI_CHECK(rope.original_max_position_embeddings > 0,
           "config.json: rope_scaling llama3 needs original_max_position_embeddings");
  const double old_context = static_cast<double>(rope.original_max_position_embeddings);
  const double low_wavelen = old_context / rope.low_freq_factor;
  const double high_wavelen = old_context / rope.high_freq_factor;
  const auto factor = static_cast<float>(rope.factor);
  for (float& f : inv) {
    const float wavelen = static_cast<float>(2 * std::numbers::pi) / f;
    float scaled = wavelen > low_wavelen ? f / factor : f;
    if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
      const float smooth = static_cast<float>((old_context / wavelen - rope.low_freq_factor) /
                                              (rope.high_freq_factor - rope.low_freq_factor));
      scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
    }
    f = scaled;
  }
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const io::ModelConfig& config, int64_t rotary_dim)
    : rotary_dim_(rotary_dim) {
  DI_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0, "rotary dimension ", rotary_dim,
           " must be a positive even number");
  inv_freq_ = default_inv_freq(config.rope_theta, rotary_dim);
  const auto& rope = config.rope_scaling;
  if (rope.type == "default" || rope.type.empty()) return;
  if (rope.type == "linear") {
    for (float& f : inv_freq_) f /= static_cast<float>(rope.factor);
  } else if (rope.type == "yarn") {
    attention_scaling_ = yarn(config, rotary_dim, inv_freq_);
  } else if (rope.type == "llama3") {
    llama3(rope, inv_freq_);
  } else {
    fail("config.json: rope scaling type '", rope.type,
         "' is not supported (supported: default, linear, yarn, llama3)");
  }
}

void RotaryEmbedding::compute(const int32_t* positions, int64_t n, float* cos, float* sin) const {
  const int64_t half = rotary_dim_ / 2;
  for (int64_t t = 0; t < n; ++t) {
    const auto position = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = position * inv_freq_[static_cast<size_t>(i)];
      cos[t * half + i] = static_cast<float>(std::cos(angle)) * attention_scaling_;
      sin[t * half + i] = static_cast<float>(std::sin(angle)) * attention_scaling_;
    }
  }
}

}  // namespace deepinfer::model
