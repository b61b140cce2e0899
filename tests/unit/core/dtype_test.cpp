#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace deepinfer {
namespace {

TEST(DType, Bf16RoundTripsExactValuesAndRoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-8 ties between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16ConvertsNormalsSubnormalsAndSpecials) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  // Every f16 value survives f16 -> f32 -> f16.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN payloads
    ASSERT_EQ(f32_to_f16(f16_to_f32(h)), h) << bits;
  }
}

TEST(DType, F8E4M3MatchesTheOcpTable) {
  EXPECT_EQ(f8_e4m3_to_f32(0x38), 1.0f);    // 0.0111.000
  EXPECT_EQ(f8_e4m3_to_f32(0x7e), 448.0f);  // largest finite
  EXPECT_EQ(f8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(f8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(f8_e4m3_to_f32(0x7f)));
}

TEST(DType, ParseRejectsUnknownNames) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_THROW(parse_dtype("f64"), Error);
}

}  // namespace
}  // namespace deepinfer
