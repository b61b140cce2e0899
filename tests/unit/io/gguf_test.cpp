#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "gguf_bytes.h"
#include "gguf_golden_data.h"
#include "test_files.h"

namespace deepinfer::io {
namespace {

using testing::float_bits;
using testing::GgufBytes;
using testing::GgufGoldens;

// ---- blocks.gguf, written by gguf-py (tools/make_gguf_goldens.py) ----

class GgufGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    goldens_ = new GgufGoldens(GgufGoldens::load());
    file_ = new GgufFile(GgufFile::open(goldens_->gguf_path));
  }
  static void TearDownTestSuite() {
    delete file_;
    delete goldens_;
  }
  static GgufGoldens* goldens_;
  static GgufFile* file_;
};
GgufGoldens* GgufGolden::goldens_ = nullptr;
GgufFile* GgufGolden::file_ = nullptr;

TEST_F(GgufGolden, TensorInfosMatchTheWriter) {
  const nlohmann::json& tensors = goldens_->index["tensors"];
  EXPECT_EQ(file_->version(), 3u);
  ASSERT_EQ(file_->tensors().size(), tensors.size());
  const size_t alignment = goldens_->index["alignment"].get<size_t>();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = file_->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, tensors[i]["name"].get<std::string>());
    EXPECT_EQ(static_cast<uint32_t>(t.type), tensors[i]["ggml_type"].get<uint32_t>());
    EXPECT_EQ(quant_traits(t.type).name, tensors[i]["type"].get<std::string>());
    EXPECT_EQ(t.shape, tensors[i]["shape"].get<Shape>());
    EXPECT_EQ(t.nbytes, tensors[i]["nbytes"].get<size_t>());
    EXPECT_EQ(t.data_begin % alignment, 0u);
    EXPECT_EQ(file_->find_tensor(t.name), &t);
    EXPECT_EQ(file_->bytes(t).size(), t.nbytes);
  }
  EXPECT_EQ(file_->find_tensor("absent"), nullptr);
}

// Bitwise: every value, including -0.0, subnormal and zero-scale blocks, as gguf-py gives it.
TEST_F(GgufGolden, ToTensorMatchesGgufPyDequantize) {
  int checked = 0;
  for (const nlohmann::json& entry : goldens_->index["tensors"]) {
    const std::vector<float> expected = goldens_->expected(entry);
    if (expected.empty()) continue;
    const GgufTensorInfo& info = *file_->find_tensor(entry["name"].get<std::string>());
    SCOPED_TRACE(info.name);
    const Tensor t = file_->to_tensor(info);
    EXPECT_EQ(t.shape(), info.shape);
    // Float types and the block types kernels run natively stay in the mapping as stored.
    const std::optional<DType> native = quant_traits(info.type).dtype;
    EXPECT_EQ(t.is_borrowed(), native.has_value());
    EXPECT_EQ(t.dtype(), native.value_or(DType::f32));
    const Tensor values = t.to(DType::f32);
    const auto got = values.span<const float>();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(float_bits(got[i]), float_bits(expected[i]))
          << "element " << i << ": " << got[i] << " vs " << expected[i];
    }
    ++checked;
  }
  EXPECT_EQ(checked, 36);
}

TEST_F(GgufGolden, FloatTensorsAreZeroCopyViews) {
  const GgufTensorInfo& info = *file_->find_tensor("bf16.1");
  const Tensor t = file_->to_tensor(info);
  EXPECT_EQ(t.dtype(), DType::bf16);
  EXPECT_TRUE(t.is_borrowed());
  EXPECT_EQ(t.raw(), static_cast<const void*>(file_->bytes(info).data()));
  EXPECT_EQ(file_->to_tensor(*file_->find_tensor("f16.0")).dtype(), DType::f16);
  EXPECT_EQ(file_->to_tensor(*file_->find_tensor("f32.0")).dtype(), DType::f32);
}

TEST_F(GgufGolden, NativeBlockTensorsAreZeroCopyViewsOfTheirRows) {
  for (const auto& [type, dtype] : {std::pair{GgmlType::q8_0, DType::q8_0},
                                    {GgmlType::q4_0, DType::q4_0},
                                    {GgmlType::q4_1, DType::q4_1},
                                    {GgmlType::q5_0, DType::q5_0},
                                    {GgmlType::q5_1, DType::q5_1},
                                    {GgmlType::q4_k, DType::q4_k},
                                    {GgmlType::q5_k, DType::q5_k},
                                    {GgmlType::q6_k, DType::q6_k}}) {
    int seen = 0;
    for (const GgufTensorInfo& info : file_->tensors()) {
      if (info.type != type) continue;
      SCOPED_TRACE(info.name);
      const Tensor t = file_->to_tensor(info);
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_EQ(t.raw(), static_cast<const void*>(file_->bytes(info).data()));
      EXPECT_EQ(t.nbytes(), info.nbytes);
      ++seen;
    }
    EXPECT_GT(seen, 0) << dtype_name(dtype);
  }
}

TEST_F(GgufGolden, BorrowedTensorKeepsTheMappingAlive) {
  Tensor t;
  {
    const GgufFile file = GgufFile::open(goldens_->gguf_path);
    t = file.to_tensor(*file.find_tensor("f32.0"));
  }
  const auto expected = goldens_->expected(goldens_->index["tensors"][0]);
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size()));
  EXPECT_EQ(t.span<const float>()[5], expected[5]);
}

TEST_F(GgufGolden, TypeWithoutDequantizerIsRefusedByName) {
  const GgufTensorInfo& info = *file_->find_tensor("q8_k.0");
  EXPECT_EQ(info.type, GgmlType::q8_k);
  testing::expect_error([&] { file_->to_tensor(info); },
                        {goldens_->gguf_path, "tensor \"q8_k.0\"", "Q8_K", "cannot dequantize"});
}

TEST_F(GgufGolden, MetadataOfEveryType) {
  const nlohmann::json& metadata = goldens_->index["metadata"];
  EXPECT_EQ(file_->metadata().size(), metadata.size());
  for (const nlohmann::json& item : metadata) {
    const std::string key = item["key"].get<std::string>();
    const std::string type = item["type"].get<std::string>();
    SCOPED_TRACE(key);
    ASSERT_EQ(file_->metadata().count(key), 1u);
    const GgufValue& value = file_->metadata().at(key);
    const nlohmann::json& want = item["value"];
    if (type == "u8" || type == "u16" || type == "u32" || type == "u64") {
      EXPECT_EQ(std::get<uint64_t>(value), want.get<uint64_t>());
    } else if (type[0] == 'i') {
      EXPECT_EQ(std::get<int64_t>(value), want.get<int64_t>());
      EXPECT_EQ(file_->get_int(key), want.get<int64_t>());
    } else if (type == "f32" || type == "f64") {
      EXPECT_EQ(std::get<double>(value), want.get<double>());
      EXPECT_EQ(file_->get_float(key), want.get<double>());
    } else if (type == "bool") {
      EXPECT_EQ(file_->get_bool(key), want.get<bool>());
    } else if (type == "string") {
      EXPECT_EQ(file_->get_string(key), want.get<std::string>());
    } else {
      ASSERT_EQ(type, "array");
      const GgufArray* array = file_->get_array(key);
      ASSERT_NE(array, nullptr);
      ASSERT_EQ(array->size(), want.size());
      const std::string element = item["element_type"].get<std::string>();
      if (element == "string") {
        EXPECT_EQ(std::get<std::vector<std::string>>(array->values),
                  want.get<std::vector<std::string>>());
      } else if (element == "bool") {
        EXPECT_EQ(std::get<std::vector<bool>>(array->values), want.get<std::vector<bool>>());
      } else if (element[0] == 'u') {
        EXPECT_EQ(std::get<std::vector<uint64_t>>(array->values),
                  want.get<std::vector<uint64_t>>());
      } else if (element[0] == 'i') {
        EXPECT_EQ(std::get<std::vector<int64_t>>(array->values), want.get<std::vector<int64_t>>());
      } else {
        EXPECT_EQ(std::get<std::vector<double>>(array->values), want.get<std::vector<double>>());
      }
    }
  }
}

TEST_F(GgufGolden, TypedAccessorsConvertOrNameTheKey) {
  EXPECT_EQ(file_->get_string("general.architecture"), "deepinfer-test");
  EXPECT_EQ(file_->get_int("general.alignment"), 64);
  EXPECT_EQ(file_->get_int("test.u32"), 4294967295);
  EXPECT_EQ(file_->get_float("test.int_as_u32"), 7.0);
  EXPECT_EQ(file_->get_float("test.i64"), -9223372036854775808.0);
  EXPECT_EQ(file_->get_float("test.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(file_->get_string("test.empty_string"), "");
  EXPECT_EQ(file_->get_string("absent"), std::nullopt);
  EXPECT_EQ(file_->get_int("absent"), std::nullopt);
  EXPECT_EQ(file_->get_float("absent"), std::nullopt);
  EXPECT_EQ(file_->get_bool("absent"), std::nullopt);
  EXPECT_EQ(file_->get_array("absent"), nullptr);
  const std::string& p = goldens_->gguf_path;
  testing::expect_error([&] { file_->get_int("test.u64"); },
                        {p, "\"test.u64\"", "18446744073709551615", "does not fit"});
  testing::expect_error([&] { file_->get_string("test.i32"); },
                        {p, "\"test.i32\" is an integer, not a string"});
  testing::expect_error([&] { file_->get_int("test.f64"); },
                        {p, "\"test.f64\" is a float, not an integer"});
  testing::expect_error([&] { file_->get_float("test.string"); },
                        {p, "\"test.string\" is a string, not a number"});
  testing::expect_error([&] { file_->get_bool("test.u8"); },
                        {p, "\"test.u8\" is an unsigned integer, not a bool"});
  testing::expect_error([&] { file_->get_array("test.bool_true"); },
                        {p, "\"test.bool_true\" is a bool, not an array"});
  testing::expect_error([&] { file_->get_string("test.arr.string"); },
                        {p, "\"test.arr.string\" is an array, not a string"});
}

// ---- hand-built files ----

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;
constexpr uint32_t kQ8_0 = 8;
constexpr uint32_t kQ4_K = 12;
const std::string kPath = "mem.gguf";

// Two tensors and two keys, default alignment: "a" f32 [4] at 0, "b" Q8_0 [32 x 2] at 32.
GgufBytes valid_file(uint32_t version = 3) {
  GgufBytes b;
  b.header(2, 2, version).kv_string("general.name", "tiny").kv_u32("test.n", 5);
  b.tensor("a", {4}, kF32, 0).tensor("b", {32, 2}, kQ8_0, 32).pad(32);
  return b.data(32 + 2 * 34);
}

GgufHeader parse(const GgufBytes& b) {
  return parse_gguf_header(b.span(), kPath);
}

void expect_rejected(const GgufBytes& b, std::initializer_list<std::string> phrases) {
  std::vector<std::string> all(phrases);
  all.push_back(kPath + ": ");
  testing::expect_error([&] { parse(b); }, all);
}

// A file with one tensor info written by `tensor`, and enough data after it.
GgufBytes one_tensor(const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset = 0,
                     size_t data = 256) {
  GgufBytes b;
  b.header(1, 0).tensor("t", ne, type, offset).pad(32);
  return b.data(data);
}

TEST(GgufHeader, ValidFileVersions2And3) {
  for (const uint32_t version : {2u, 3u}) {
    const GgufBytes b = valid_file(version);
    const GgufHeader h = parse(b);
    EXPECT_EQ(h.version, version);
    EXPECT_EQ(h.data_offset % 32, 0u);
    ASSERT_EQ(h.tensors.size(), 2u);
    EXPECT_EQ(h.tensors[0].shape, (Shape{4}));
    EXPECT_EQ(h.tensors[0].nbytes, 16u);
    EXPECT_EQ(h.tensors[0].data_begin, h.data_offset);
    EXPECT_EQ(h.tensors[1].type, GgmlType::q8_0);
    EXPECT_EQ(h.tensors[1].shape, (Shape{2, 32}));  // ne [32, 2] reversed
    EXPECT_EQ(h.tensors[1].nbytes, 68u);
    EXPECT_EQ(h.tensors[1].data_begin, h.data_offset + 32);
    EXPECT_EQ(h.data_offset + 32 + 68, b.size());
    EXPECT_EQ(std::get<std::string>(h.metadata.at("general.name")), "tiny");
    EXPECT_EQ(std::get<uint64_t>(h.metadata.at("test.n")), 5u);
  }
}

TEST(GgufHeader, OpenNamesThePath) {
  testing::TempDir dir;
  const std::string path = dir.file("bad.gguf");
  GgufBytes b;
  b.raw("GGML").u32(3);
  testing::write_bytes(path, b.bytes());
  testing::expect_error([&] { GgufFile::open(path); }, {path + ": not a GGUF file"});
  testing::write_bytes(path, valid_file().bytes());
  EXPECT_EQ(GgufFile::open(path).tensors().size(), 2u);
}

TEST(GgufHeader, NoTensorsNeedsNoDataSection) {
  GgufBytes b;
  b.header(0, 1).kv_u32("test.n", 1);  // ends unpadded, as some writers leave it
  const GgufHeader h = parse(b);
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_EQ(h.data_offset, b.size());
}

TEST(GgufHeader, CustomAlignment) {
  GgufBytes b;
  b.header(2, 1).kv_u32("general.alignment", 16);
  b.tensor("a", {4}, kF32, 0).tensor("b", {4}, kF32, 16).pad(16).data(32);
  const GgufHeader h = parse(b);
  EXPECT_EQ(h.data_offset % 16, 0u);
  EXPECT_EQ(h.tensors[1].data_begin, h.data_offset + 16);
}

TEST(GgufErrors, WrongMagic) {
  GgufBytes b;
  b.raw("GGML").u32(3).u64(0).u64(0);
  expect_rejected(b, {"not a GGUF file", "\"GGML\""});
}

TEST(GgufErrors, EmptyFile) {
  expect_rejected(GgufBytes(), {"truncated", "magic"});
}

TEST(GgufErrors, Version1) {
  GgufBytes b;
  b.header(0, 0, 1);
  expect_rejected(b, {"GGUF version 1 is not supported"});
}

TEST(GgufErrors, UnknownVersions) {
  for (const uint32_t version : {0u, 4u, 0xffffu}) {
    GgufBytes b;
    b.header(0, 0, version);
    expect_rejected(b, {str_cat("GGUF version ", version, " is not supported")});
  }
}

TEST(GgufErrors, BigEndianFile) {
  GgufBytes b;
  b.raw("GGUF").raw(std::string("\0\0\0\3", 4)).u64(0).u64(0);
  expect_rejected(b, {"big-endian", "only little-endian"});
}

// Every proper prefix of a valid file is refused with a message, never a crash or a read past
// the end (ASan builds check the latter).
TEST(GgufErrors, TruncatedAtEveryByte) {
  const GgufBytes full = valid_file();
  ASSERT_NO_THROW(parse(full));
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    const std::string prefix = full.bytes().substr(0, n);
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(prefix.data()), n);
    testing::expect_error([&] { parse_gguf_header(bytes, kPath); }, {kPath + ": ", "truncated"});
  }
}

TEST(GgufErrors, KeyLengthHuge) {
  GgufBytes b;
  b.header(0, 1).u64(1ull << 40).raw("general.name");
  expect_rejected(b, {"metadata key 0", "string length 1099511627776 exceeds the"});
}

TEST(GgufErrors, StringValueLengthHuge) {
  GgufBytes b;
  b.header(0, 1).str("general.name").u32(testing::kGgufString).u64(1ull << 40).raw("tiny");
  expect_rejected(b, {"metadata key \"general.name\"", "string length 1099511627776"});
}

TEST(GgufErrors, ArrayCountHuge) {
  GgufBytes b;
  b.header(0, 1).str("test.a").u32(testing::kGgufArray).u32(testing::kGgufU8).u64(1ull << 60);
  b.data(64);
  expect_rejected(b, {"\"test.a\"", "array of 1152921504606846976 u8 values"});
}

TEST(GgufErrors, StringArrayCountHuge) {
  GgufBytes b;
  b.header(0, 1).str("tokens").u32(testing::kGgufArray).u32(testing::kGgufString);
  b.u64(1ull << 60).data(64);
  expect_rejected(
      b, {"\"tokens\"", "array of 1152921504606846976 string values", "at least 8 bytes each"});
}

TEST(GgufErrors, StringInArrayLengthHuge) {
  GgufBytes b;
  b.header(0, 1).str("tokens").u32(testing::kGgufArray).u32(testing::kGgufString).u64(2);
  b.str("ok").u64(1ull << 40).data(16);
  expect_rejected(b, {"\"tokens\" element 1", "string length 1099511627776"});
}

TEST(GgufErrors, TensorCountHuge) {
  GgufBytes b;
  b.header(1ull << 62, 0).data(100);
  expect_rejected(b, {"tensor count 4611686018427387904 cannot fit"});
}

TEST(GgufErrors, MetadataCountHuge) {
  GgufBytes b;
  b.header(0, 1ull << 62).data(100);
  expect_rejected(b, {"metadata count 4611686018427387904 cannot fit"});
}

TEST(GgufErrors, TensorPastTheEnd) {
  expect_rejected(one_tensor({4}, kF32, 1ull << 40, 64),
                  {"tensor \"t\" at data offset 1099511627776", "ends past the data section"});
  // 64 f32 = 256 bytes, 255 present.
  expect_rejected(one_tensor({64}, kF32, 0, 255), {"tensor \"t\"", "256 bytes ends past"});
  // An offset + size that wraps around 2^64 is still past the end.
  expect_rejected(one_tensor({4}, kF32, ~31ull, 64), {"ends past the data section"});
}

TEST(GgufErrors, OverlappingTensors) {
  GgufBytes b;
  b.header(2, 0).tensor("a", {16}, kF32, 0).tensor("b", {4}, kF32, 32).pad(32).data(64);
  expect_rejected(b, {"tensors \"a\" [0, 64) and \"b\" [32, 48) overlap"});
}

TEST(GgufErrors, MisalignedOffset) {
  expect_rejected(one_tensor({4}, kF32, 16),
                  {"tensor \"t\" has data offset 16, not a multiple of the alignment 32"});
  GgufBytes b;  // the custom alignment applies
  b.header(1, 1).kv_u32("general.alignment", 64).tensor("t", {4}, kF32, 32).pad(64).data(64);
  expect_rejected(b, {"data offset 32, not a multiple of the alignment 64"});
}

TEST(GgufErrors, BadAlignmentValue) {
  for (const uint32_t alignment : {0u, 48u, 0xffffffffu}) {
    GgufBytes b;
    b.header(0, 1).kv_u32("general.alignment", alignment);
    expect_rejected(b, {"\"general.alignment\" is ", "must be a power of two"});
  }
  GgufBytes b;
  b.header(0, 1).str("general.alignment").u32(testing::kGgufU64).u64(32);
  expect_rejected(b, {"\"general.alignment\" must be a u32, got u64"});
}

TEST(GgufErrors, UnknownGgmlType) {
  expect_rejected(one_tensor({4}, 99), {"tensor \"t\" has ggml type 99, which is unknown"});
  expect_rejected(one_tensor({256}, 16), {"ggml type 16 (IQ2_XXS), which deepinfer cannot read"});
}

TEST(GgufErrors, RowNotAMultipleOfTheBlockSize) {
  expect_rejected(one_tensor({33, 2}, kQ4_0),
                  {"tensor \"t\" is Q4_0 with rows of 33 elements", "block size 32"});
  expect_rejected(one_tensor({128, 2}, kQ4_K), {"Q4_K with rows of 128", "block size 256"});
}

TEST(GgufErrors, DimensionCount) {
  expect_rejected(one_tensor({}, kF32), {"tensor \"t\" has 0 dimensions", "1 to 4"});
  expect_rejected(one_tensor({1, 1, 1, 1, 1}, kF32), {"tensor \"t\" has 5 dimensions"});
  EXPECT_EQ(parse(one_tensor({2, 1, 1, 1}, kF32)).tensors[0].shape, (Shape{1, 1, 1, 2}));
}

TEST(GgufErrors, ZeroDimension) {
  expect_rejected(one_tensor({4, 0}, kF32), {"tensor \"t\" has dimension 1 = 0"});
}

TEST(GgufErrors, DimensionOverflow) {
  expect_rejected(one_tensor({1ull << 32, 1ull << 32}, kF32),
                  {"tensor \"t\": dimension 1 = 4294967296", "element count overflow"});
  expect_rejected(one_tensor({1ull << 63}, kF32), {"dimension 0 = 9223372036854775808"});
  expect_rejected(one_tensor({1ull << 62}, kF32),
                  {"4611686018427387904 F32 elements overflow a 64-bit byte count"});
}

TEST(GgufErrors, DuplicateKey) {
  GgufBytes b;
  b.header(0, 2).kv_u32("test.n", 1).kv_u32("test.n", 2);
  expect_rejected(b, {"duplicate metadata key \"test.n\""});
}

TEST(GgufErrors, DuplicateTensorName) {
  GgufBytes b;
  b.header(2, 0).tensor("w", {4}, kF32, 0).tensor("w", {4}, kF32, 32).pad(32).data(64);
  expect_rejected(b, {"duplicate tensor name \"w\""});
}

TEST(GgufErrors, NestedArray) {
  GgufBytes b;
  b.header(0, 1).str("test.a").u32(testing::kGgufArray).u32(testing::kGgufArray).u64(1);
  b.u32(testing::kGgufU8).u64(1).u8(0);
  expect_rejected(b, {"\"test.a\": nested arrays are not supported"});
}

TEST(GgufErrors, UnknownValueTypes) {
  GgufBytes b;
  b.header(0, 1).str("test.x").u32(13).u64(0);
  expect_rejected(b, {"\"test.x\": unknown value type 13"});
  GgufBytes a;
  a.header(0, 1).str("test.a").u32(testing::kGgufArray).u32(0x80000000u).u64(0);
  expect_rejected(a, {"\"test.a\": unknown array element type 2147483648"});
}

TEST(GgufErrors, BoolNotZeroOrOne) {
  GgufBytes b;
  b.header(0, 1).str("test.b").u32(testing::kGgufBool).u8(2);
  expect_rejected(b, {"\"test.b\": bool value 2 is neither 0 nor 1"});
}

TEST(GgufErrors, EmptyKeyOrTensorName) {
  GgufBytes b;
  b.header(0, 1).kv_u32("", 1);
  expect_rejected(b, {"metadata key 0 is empty"});
  GgufBytes t;
  t.header(1, 0).tensor("", {4}, kF32, 0).pad(32).data(16);
  expect_rejected(t, {"tensor 0 has an empty name"});
}

TEST(GgufErrors, BinaryNamesStayPrintable) {
  GgufBytes b;
  b.header(0, 2).kv_u32(std::string("k\x01\xff", 3), 1).kv_u32(std::string("k\x01\xff", 3), 1);
  expect_rejected(b, {"duplicate metadata key \"k\\x01\\xff\""});
}

}  // namespace
}  // namespace deepinfer::io
