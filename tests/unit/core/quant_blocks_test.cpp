#include "core/quant_blocks.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_golden_data.h"

namespace deepinfer {
namespace {

// Sizes from the block structs of llama.cpp's ggml/src/ggml-common.h.
TEST(QuantTraits, BlockSizesAreGgmls) {
  struct Row {
    uint32_t number;
    const char* name;
    int64_t block_size;
    size_t block_bytes;
    bool decodes;
  };
  const Row rows[] = {
      {0, "F32", 1, 4, true},       {1, "F16", 1, 2, true},        {2, "Q4_0", 32, 18, true},
      {3, "Q4_1", 32, 20, true},    {6, "Q5_0", 32, 22, true},     {7, "Q5_1", 32, 24, true},
      {8, "Q8_0", 32, 34, true},    {9, "Q8_1", 32, 36, false},    {10, "Q2_K", 256, 84, true},
      {11, "Q3_K", 256, 110, true}, {12, "Q4_K", 256, 144, true},  {13, "Q5_K", 256, 176, true},
      {14, "Q6_K", 256, 210, true}, {15, "Q8_K", 256, 292, false}, {30, "BF16", 1, 2, true},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const auto traits = quant_traits(row.number);
    ASSERT_TRUE(traits.has_value());
    EXPECT_EQ(static_cast<uint32_t>(traits->type), row.number);
    EXPECT_EQ(traits->name, row.name);
    EXPECT_EQ(traits->block_size, row.block_size);
    EXPECT_EQ(traits->block_bytes, row.block_bytes);
    EXPECT_EQ(traits->dequantize_row != nullptr, row.decodes);
    EXPECT_EQ(&quant_traits(traits->type), &quant_traits(traits->type));
    EXPECT_EQ(quant_traits(traits->type).name, row.name);
  }
}

// The types a Tensor holds as stored: the float types and the block types with native kernels.
TEST(QuantTraits, DTypesOfTheTypesHeldAsStored) {
  EXPECT_EQ(quant_traits(GgmlType::f32).dtype, DType::f32);
  EXPECT_EQ(quant_traits(GgmlType::f16).dtype, DType::f16);
  EXPECT_EQ(quant_traits(GgmlType::bf16).dtype, DType::bf16);
  EXPECT_EQ(quant_traits(GgmlType::q8_0).dtype, DType::q8_0);
  EXPECT_EQ(quant_traits(GgmlType::q4_0).dtype, DType::q4_0);
  EXPECT_EQ(quant_traits(GgmlType::q4_1).dtype, DType::q4_1);
  EXPECT_EQ(quant_traits(GgmlType::q5_0).dtype, DType::q5_0);
  EXPECT_EQ(quant_traits(GgmlType::q5_1).dtype, DType::q5_1);
  EXPECT_EQ(quant_traits(GgmlType::q4_k).dtype, DType::q4_k);
  EXPECT_EQ(quant_traits(GgmlType::q5_k).dtype, DType::q5_k);
  EXPECT_EQ(quant_traits(GgmlType::q6_k).dtype, DType::q6_k);
  EXPECT_FALSE(quant_traits(GgmlType::q2_k).dtype.has_value());
  EXPECT_FALSE(quant_traits(GgmlType::q3_k).dtype.has_value());
  EXPECT_EQ(block_traits(DType::q6_k)->block_bytes, 210u);
  EXPECT_EQ(block_traits(DType::q6_k)->block_size, 256);
  ASSERT_NE(block_traits(DType::q4_1), nullptr);
  EXPECT_EQ(block_traits(DType::q4_1)->type, GgmlType::q4_1);
  EXPECT_EQ(block_traits(DType::q8_0)->block_bytes, 34u);
  EXPECT_EQ(block_traits(DType::f32), nullptr);
  EXPECT_EQ(block_traits(DType::bf16), nullptr);
  EXPECT_EQ(dtype_name(DType::q4_0), "q4_0");
}

TEST(QuantTraits, UnknownNumbers) {
  for (const uint32_t n : {4u, 5u, 16u, 24u, 31u, 99u, 0xffffffffu}) {
    EXPECT_FALSE(quant_traits(n).has_value()) << n;
  }
  EXPECT_THROW(quant_traits(static_cast<GgmlType>(99)), Error);
}

TEST(QuantTraits, RowBytes) {
  EXPECT_EQ(quant_row_bytes(GgmlType::f32, 7), 28u);
  EXPECT_EQ(quant_row_bytes(GgmlType::q4_0, 64), 36u);
  EXPECT_EQ(quant_row_bytes(GgmlType::q6_k, 512), 420u);
  EXPECT_EQ(quant_row_bytes(GgmlType::q8_0, 0), 0u);
  try {
    quant_row_bytes(GgmlType::q4_k, 300);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K row of 300 elements"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(quant_row_bytes(GgmlType::q4_0, -32), Error);
  EXPECT_THROW(quant_row_bytes(GgmlType::f32, int64_t{1} << 62), Error);  // 2^64 bytes
}

void put_f16(uint8_t* p, float v) {
  const uint16_t bits = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(bits & 0xff);
  p[1] = static_cast<uint8_t>(bits >> 8);
}

std::vector<float> dequantize(GgmlType type, const uint8_t* block, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  quant_traits(type).dequantize_row(block, out.data(), n);
  return out;
}

// Hand-checked blocks: the layouts as ggml-common.h documents them.
TEST(Dequantize, Q4_0ByHand) {
  std::array<uint8_t, 18> block{};
  put_f16(block.data(), 0.5f);
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequantize(GgmlType::q4_0, block.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;            // low nibble
    EXPECT_EQ(y[16 + j], (7 - j) * 0.5f) << 16 + j;  // high nibble
  }
}

TEST(Dequantize, Q5_1ByHand) {
  std::array<uint8_t, 24> block{};
  put_f16(block.data(), 0.25f);
  put_f16(block.data() + 2, -1.0f);
  block[4] = 0x01;       // fifth bit of element 0
  block[7] = 0x80;       // fifth bit of element 31
  block[8] = 0x3f;       // element 0: 15, element 16: 3
  block[8 + 15] = 0xf0;  // element 15: 0, element 31: 15
  const auto y = dequantize(GgmlType::q5_1, block.data(), 32);
  EXPECT_EQ(y[0], (15 + 16) * 0.25f - 1.0f);
  EXPECT_EQ(y[16], 3 * 0.25f - 1.0f);
  EXPECT_EQ(y[15], -1.0f);
  EXPECT_EQ(y[31], (15 + 16) * 0.25f - 1.0f);
  EXPECT_EQ(y[1], -1.0f);
}

TEST(Dequantize, Q8_0ByHand) {
  std::array<uint8_t, 34> block{};
  put_f16(block.data(), 0.125f);
  block[2] = 0x80;   // -128
  block[3] = 0x7f;   // 127
  block[33] = 0xff;  // -1
  const auto y = dequantize(GgmlType::q8_0, block.data(), 32);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[1], 15.875f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[31], -0.125f);
}

// Group 5 of a Q4_K block takes its scale from the low nibble of scales[9] and the top two bits
// of scales[1], its min from the high nibble of scales[9] and the top two bits of scales[5].
TEST(Dequantize, Q4_KScalesOfTheUpperGroupsByHand) {
  std::array<uint8_t, 144> block{};
  put_f16(block.data(), 0.5f);       // d
  put_f16(block.data() + 2, 0.25f);  // dmin
  uint8_t* scales = block.data() + 4;
  scales[1] = 0x80 | 3;  // group 1: scale 3; top bits 0b10 of group 5's scale
  scales[5] = 0x40 | 2;  // group 1: min 2; top bits 0b01 of group 5's min
  scales[9] = 0x76;      // group 5: scale low nibble 6, min low nibble 7
  uint8_t* q = block.data() + 16;
  q[0] = 0x21;       // element 0 (group 0, low nibble) = 1, element 32 (group 1) = 2
  q[64 + 5] = 0x90;  // element 128 + 5 (group 4) = 0, element 160 + 5 (group 5) = 9
  const auto y = dequantize(GgmlType::q4_k, block.data(), 256);
  EXPECT_EQ(y[0], 0.0f);                                         // group 0 scale 0 min 0
  EXPECT_EQ(y[32], 0.5f * 3 * 2 - 0.25f * 2);                    // group 1
  const float scale5 = 0.5f * static_cast<float>(6 | (2 << 4));  // 38
  const float min5 = 0.25f * static_cast<float>(7 | (1 << 4));   // 23
  EXPECT_EQ(y[160 + 5], scale5 * 9 - min5);
  EXPECT_EQ(y[160], -min5);
}

TEST(Dequantize, Q6_KByHand) {
  std::array<uint8_t, 210> block{};
  put_f16(block.data() + 208, 0.5f);
  auto* scales = reinterpret_cast<int8_t*>(block.data() + 192);
  scales[0] = -3;           // elements 0..15
  scales[6] = 2;            // elements 96..111
  block[0] = 0xa5;          // element 0 low nibble 5, element 64 low nibble 10
  block[128] = 0x3 | 0x80;  // element 0 high bits 3, element 96 high bits 2
  block[32] = 0xf0;         // element 96 low nibble 15 (high nibble of ql[32])
  const auto y = dequantize(GgmlType::q6_k, block.data(), 256);
  EXPECT_EQ(y[0], 0.5f * -3 * ((5 | (3 << 4)) - 32));
  EXPECT_EQ(y[96], 0.5f * 2 * ((15 | (2 << 4)) - 32));
  EXPECT_EQ(y[1], 0.5f * -3 * -32);
}

// Every block tensor of blocks.gguf (gguf-py quantize output, or random k-quant blocks)
// decodes bit-identically to gguf-py's dequantize.
TEST(Dequantize, MatchesGgufPyOnEveryType) {
  const auto goldens = io::testing::GgufGoldens::load();
  const io::GgufFile file = io::GgufFile::open(goldens.gguf_path);
  std::set<std::string> types;
  for (const nlohmann::json& entry : goldens.index["tensors"]) {
    const std::vector<float> expected = goldens.expected(entry);
    if (expected.empty()) continue;
    const io::GgufTensorInfo& info = *file.find_tensor(entry["name"].get<std::string>());
    SCOPED_TRACE(info.name);
    const QuantTraits& traits = quant_traits(info.type);
    std::vector<float> got(expected.size());
    traits.dequantize_row(file.bytes(info).data(), got.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(io::testing::float_bits(got[i]), io::testing::float_bits(expected[i]))
          << "element " << i << ": " << got[i] << " vs " << expected[i];
    }
    types.insert(std::string(traits.name));
  }
  EXPECT_EQ(types, (std::set<std::string>{"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                          "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}));
}

}  // namespace
}  // namespace deepinfer
