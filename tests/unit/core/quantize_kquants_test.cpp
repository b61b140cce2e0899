// The k-quant quantizers (core/quantize_kquants.cpp) on properties of their own: the blocks
// dequantize to within a grid step, zeros stay exact zeros, and rows that are
// not whole super-blocks are refused. Bit-exactness with llama.cpp is checked against
// llama-quantize's blocks in tests/unit/model/llamacpp_blocks_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "core/quantize_blocks.h"

namespace deepinfer {
namespace {

constexpr GgmlType kKQuants[] = {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k};

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(quant_row_bytes(type, n));
  quantize_row(type, x.data(), q.data(), n);
  std::vector<float> back(x.size());
  quant_traits(type).dequantize_row(q.data(), back.data(), n);
  return back;
}

// One step of the group's grid: (max - min) / 15 or / 31 for Q4_K / Q5_K (groups of 32 with a
// min), max |x| / 32 for Q6_K (groups of 16, symmetric).
double group_step(GgmlType type, const float* g) {
  const int n = type == GgmlType::q6_k ? 16 : 32;
  const auto [lo, hi] = std::minmax_element(g, g + n);
  if (type == GgmlType::q6_k) return std::max(std::fabs(*lo), std::fabs(*hi)) / 32.0;
  return (std::max(*hi, 0.0f) - std::min(*lo, 0.0f)) / (type == GgmlType::q4_k ? 15.0 : 31.0);
}

TEST(QuantizeKQuants, DequantizedWithinAGridStep) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(1024);
  for (size_t i = 0; i < x.size(); ++i) {
    // Super-blocks of different character: gaussian, a sine, a gaussian with outliers.
    x[i] = i < 256   ? normal(rng)
           : i < 512 ? 3.0f * std::sin(0.37f * static_cast<float>(i))
                     : normal(rng);
    if (i >= 768 && i % 61 == 0) x[i] *= 20.0f;
  }
  for (GgmlType type : kKQuants) {
    SCOPED_TRACE(std::string(quant_traits(type).name));
    const std::vector<float> back = round_trip(type, x);
    const int group = type == GgmlType::q6_k ? 16 : 32;
    double err2 = 0, x2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      // Half a step from rounding, plus the 6-bit (8-bit) rounding of the group scales and
      // mins against the super-block's f16 scales, which can cost a small group (beside an
      // outlier's) its own resolution: within one step of the super-block's coarsest group.
      double step = 0;
      for (size_t g = i / 256 * 256; g < i / 256 * 256 + 256; g += group)
        step = std::max(step, group_step(type, &x[g]));
      EXPECT_LE(std::fabs(back[i] - x[i]), step) << "element " << i;
      err2 += (back[i] - x[i]) * (back[i] - x[i]);
      x2 += x[i] * x[i];
    }
    // More bits, smaller errors: relative RMS error about 2^-bits of the range.
    const double rel = std::sqrt(err2 / x2);
    EXPECT_LT(rel, type == GgmlType::q4_k ? 0.12 : type == GgmlType::q5_k ? 0.06 : 0.03);
  }
}

TEST(QuantizeKQuants, ZerosStayExactZeros) {
  std::vector<float> x(512, 0.0f);
  for (size_t i = 300; i < 340; ++i) x[i] = 0.5f - 0.01f * static_cast<float>(i - 300);
  for (GgmlType type : kKQuants) {
    SCOPED_TRACE(std::string(quant_traits(type).name));
    const std::vector<float> back = round_trip(type, x);
    for (size_t i = 0; i < 256; ++i) EXPECT_EQ(back[i], 0.0f) << "element " << i;  // zero block
  }
  // Q6_K writes an all-zero super-block as zero bytes, d included.
  std::vector<uint8_t> q(210, 0xAA);
  quantize_row(GgmlType::q6_k, x.data(), q.data(), 256);
  EXPECT_TRUE(std::all_of(q.begin(), q.end(), [](uint8_t b) { return b == 0; }));
}

TEST(QuantizeKQuants, RowsThatAreNotWholeSuperBlocksAreRefused) {
  std::vector<float> x(896, 0.1f);
  std::vector<uint8_t> q(2048);
  try {
    quantize_row(GgmlType::q4_k, x.data(), q.data(), 896);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "a Q4_K row of 896 elements is not a whole number of 256-element blocks");
  }
  EXPECT_EQ(quantizable_types(), "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K");
}

}  // namespace
}  // namespace deepinfer
