// The reference quantizers against gguf-py 0.19.0's gguf.quants.quantize, byte for byte, on
// the committed rows of tools/make_quantize_goldens.py (tests/data/quantize/rows.json).
#include "core/quantize_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_file.h"

namespace deepinfer {
namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

std::vector<float> floats_from_hex(const std::string& hex) {
  const std::vector<uint8_t> bytes = from_hex(hex);
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t bits = static_cast<uint32_t>(bytes[4 * i]) |
                          (static_cast<uint32_t>(bytes[4 * i + 1]) << 8) |
                          (static_cast<uint32_t>(bytes[4 * i + 2]) << 16) |
                          (static_cast<uint32_t>(bytes[4 * i + 3]) << 24);
    std::memcpy(&out[i], &bits, sizeof(float));
  }
  return out;
}

GgmlType type_named(const std::string& name) {
  for (GgmlType t :
       {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1}) {
    if (quant_traits(t).name == name) return t;
  }
  fail("rows.json names an unknown type ", name);
}

nlohmann::json goldens() {
  return read_json_file(std::string(DEEPINFER_TEST_DATA_DIR) + "/quantize/rows.json");
}

TEST(QuantizeBlocks, EveryCaseAndTypeIsBitIdenticalToGgufPy) {
  const nlohmann::json doc = goldens();
  ASSERT_GE(doc["cases"].size(), 7u);
  int compared = 0;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"];
    const int64_t rows = c["rows"];
    const int64_t cols = c["cols"];
    const std::vector<float> input = floats_from_hex(c["input_f32_le"]);
    ASSERT_EQ(static_cast<int64_t>(input.size()), rows * cols) << name;
    ASSERT_EQ(c["quantized"].size(), 5u) << name;
    for (const auto& [type_name, hex] : c["quantized"].items()) {
      SCOPED_TRACE(name + " " + type_name);
      const GgmlType type = type_named(type_name);
      const std::vector<uint8_t> want = from_hex(hex.get<std::string>());
      const size_t row_bytes = quant_row_bytes(type, cols);
      ASSERT_EQ(want.size(), row_bytes * static_cast<size_t>(rows));
      std::vector<uint8_t> got(want.size(), 0xAA);
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row(type, input.data() + r * cols, got.data() + r * row_bytes, cols);
      }
      const size_t block_bytes = quant_traits(type).block_bytes;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "byte " << i % block_bytes << " of block " << i / block_bytes;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 35);
}

// Hand-checked blocks, independent of the goldens: Q8_0's scale is amax / 127 and roundf
// rounds halves away from zero; Q4_0's scale takes the sign of the largest magnitude.
TEST(QuantizeBlocks, HandCheckedQ8_0AndQ4_0Blocks) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1.0 (f16 0x3c00), id = 1
  x[1] = 2.5f;    // -> 3
  x[2] = -2.5f;   // -> -3
  x[3] = 0.49f;   // -> 0
  uint8_t q8[34];
  quantize_row(GgmlType::q8_0, x.data(), q8, 32);
  EXPECT_EQ(q8[0], 0x00);
  EXPECT_EQ(q8[1], 0x3c);
  EXPECT_EQ(static_cast<int8_t>(q8[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(q8[3]), 3);
  EXPECT_EQ(static_cast<int8_t>(q8[4]), -3);
  EXPECT_EQ(static_cast<int8_t>(q8[5]), 0);

  std::vector<float> y(32, 1.0f);
  y[7] = -16.0f;  // max = -16: d = 2.0 (f16 0x4000), id = 0.5; it maps to quant 0
  y[20] = 15.0f;  // 15 * 0.5 + 8.5 = 16 -> clamped to 15
  uint8_t q4[18];
  quantize_row(GgmlType::q4_0, y.data(), q4, 32);
  EXPECT_EQ(q4[0], 0x00);
  EXPECT_EQ(q4[1], 0x40);
  EXPECT_EQ(q4[2 + 7] & 0x0f, 0);  // element 7: low nibble of byte 7
  EXPECT_EQ(q4[2 + 4] >> 4, 15);   // element 20: high nibble of byte 4
  EXPECT_EQ(q4[2 + 0] & 0x0f, 9);  // 1 * 0.5 + 8.5 = 9
}

TEST(QuantizeBlocks, QuantizeThenDequantizeIsWithinHalfAStep) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  for (GgmlType type :
       {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1}) {
    const QuantTraits& traits = quant_traits(type);
    SCOPED_TRACE(std::string(traits.name));
    std::vector<uint8_t> q(quant_row_bytes(type, 64));
    quantize_row(type, x.data(), q.data(), 64);
    std::vector<float> back(64);
    traits.dequantize_row(q.data(), back.data(), 64);
    // Steps (|x| <= 3): 3/127 (Q8_0), 3/8 (Q4_0), 6/15 (Q4_1), 3/16 (Q5_0), 6/31 (Q5_1).
    // Rounding is within half a step, except that Q4_0 / Q5_0 clamp the side opposite the
    // largest magnitude (quants -8..7 and -16..15), a full step; plus the f16 rounding of the
    // scales (2^-11 relative, times up to 127 quants).
    const double step = type == GgmlType::q8_0   ? 3.0 / 127
                        : type == GgmlType::q4_0 ? 3.0 / 8
                        : type == GgmlType::q4_1 ? 6.0 / 15
                        : type == GgmlType::q5_0 ? 3.0 / 16
                                                 : 6.0 / 31;
    const bool symmetric = type == GgmlType::q4_0 || type == GgmlType::q5_0;
    const double bound = (symmetric ? 1.0 : 0.5) * step + 1e-2;
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_LE(std::fabs(back[i] - x[i]), bound) << "element " << i;
    }
  }
}

TEST(QuantizeBlocks, RefusesPartialBlocksAndTypesWithoutAQuantizer) {
  std::vector<float> x(48, 1.0f);
  std::vector<uint8_t> out(64);
  EXPECT_THROW(quantize_row(GgmlType::q8_0, x.data(), out.data(), 48), Error);
  EXPECT_FALSE(can_quantize(GgmlType::q3_k));
  EXPECT_TRUE(can_quantize(GgmlType::q5_1));
  EXPECT_TRUE(can_quantize(GgmlType::q4_k));
  try {
    quantize_row(GgmlType::q3_k, x.data(), out.data(), 256);
    ADD_FAILURE() << "Q3_K quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace deepinfer
