#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/dtype.h"
#include "test_files.h"

namespace deepinfer::io {
namespace {

using testing::expect_error;
using testing::read_bytes;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::write_bytes;

// Made by the reference library (safetensors 0.8.0 via torch):
//   save({"w": f32 [[1.5,-2.25,3],[0.125,-0.5,1e-3]], "b": bf16 [1,-3.5,0.0078125],
//         "h": f16 [65504,-0.333], "i": i8 [-128,127,0,5], "e": f8_e4m3fn [448,-0.015625],
//         "z": f32 zeros(0,2), "s": f32 scalar 7, "n": i64 [1,-2]}, metadata={"format":"pt"})
constexpr const char* kReferenceHex =
    "e0010000000000007b225f5f6d657461646174615f5f223a7b22666f726d6174223a227074227d2c226e223a7b"
    "226474797065223a22493634222c227368617065223a5b325d2c22646174615f6f666673657473223a5b302c31"
    "365d7d2c2273223a7b226474797065223a22463332222c227368617065223a5b5d2c22646174615f6f66667365"
    "7473223a5b31362c32305d7d2c2277223a7b226474797065223a22463332222c227368617065223a5b322c335d"
    "2c22646174615f6f666673657473223a5b32302c34345d7d2c227a223a7b226474797065223a22463332222c22"
    "7368617065223a5b302c325d2c22646174615f6f666673657473223a5b34342c34345d7d2c2262223a7b226474"
    "797065223a2242463136222c227368617065223a5b335d2c22646174615f6f666673657473223a5b34342c3530"
    "5d7d2c2268223a7b226474797065223a22463136222c227368617065223a5b325d2c22646174615f6f66667365"
    "7473223a5b35302c35345d7d2c2265223a7b226474797065223a2246385f45344d33222c227368617065223a5b"
    "325d2c22646174615f6f666673657473223a5b35342c35365d7d2c2269223a7b226474797065223a224938222c"
    "227368617065223a5b345d2c22646174615f6f666673657473223a5b35362c36305d7d7d202001000000000000"
    "00feffffffffffffff0000e0400000c03f000010c0000040400000003e000000bf6f12833a803f60c0003cff7b"
    "54b57e88807f0005";

std::string from_hex(const char* hex) {
  std::string out;
  for (size_t i = 0; hex[i] != '\0'; i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex + i, 2), nullptr, 16)));
  }
  return out;
}

template <typename T>
Tensor make(Shape shape, DType dtype, std::initializer_list<T> values) {
  Tensor t = Tensor::zeros(std::move(shape), dtype);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::memcpy(t.raw(), values.begin(), t.nbytes());
  return t;
}

// The tensors of kReferenceHex, built here from their bit patterns (torch's, printed next to
// the file): bf16/f16/f8 conversions are not under test in this file.
std::vector<std::pair<std::string, Tensor>> reference_tensors() {
  return {
      {"w", make<float>({2, 3}, DType::f32, {1.5f, -2.25f, 3.0f, 0.125f, -0.5f, 1e-3f})},
      {"b", make<uint16_t>({3}, DType::bf16, {16256, 49248, 15360})},
      {"h", make<uint16_t>({2}, DType::f16, {31743, 46420})},
      {"i", make<int8_t>({4}, DType::i8, {-128, 127, 0, 5})},
      {"e", make<uint8_t>({2}, DType::f8_e4m3, {126, 136})},
      {"z", Tensor::zeros({0, 2}, DType::f32)},
      {"s", make<float>({}, DType::f32, {7.0f})},
      {"n", make<int64_t>({2}, DType::i64, {1, -2})},
  };
}

void expect_same_tensor(const Tensor& got, const Tensor& want, const std::string& name) {
  EXPECT_EQ(got.dtype(), want.dtype()) << name;
  EXPECT_EQ(got.shape(), want.shape()) << name;
  ASSERT_EQ(got.nbytes(), want.nbytes()) << name;
  if (want.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << name;
  }
}

TEST(Safetensors, ReadsFileWrittenByReferenceLibrary) {
  TempDir dir;
  const std::string path = dir.file("ref.safetensors");
  write_bytes(path, from_hex(kReferenceHex));
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(file.tensors().size(), 8u);
  for (const auto& [name, want] : reference_tensors()) {
    ASSERT_TRUE(file.contains(name)) << name;
    expect_same_tensor(file.get(name), want, name);
  }
  EXPECT_EQ(file.get("w").span<float>()[5], 1e-3f);
  EXPECT_EQ(file.get("s").ndim(), 0);
  EXPECT_EQ(file.get("s").numel(), 1);
  EXPECT_EQ(file.info("n").data_begin, 8u + 0x1e0u);
  EXPECT_EQ(file.info("n").data_end, 8u + 0x1e0u + 16u);
}

TEST(Safetensors, WriterMatchesReferenceLibraryByteForByte) {
  TempDir dir;
  const std::string path = dir.file("ours.safetensors");
  write_safetensors(path, reference_tensors(), {{"format", "pt"}});
  EXPECT_EQ(read_bytes(path), from_hex(kReferenceHex));
}

TEST(Safetensors, RoundTripRandomTensorsOfEveryDtype) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<std::pair<std::string, Tensor>> tensors;
  const std::pair<DType, Shape> specs[] = {
      {DType::f32, {7, 5}},  {DType::bf16, {3, 11}}, {DType::f16, {13}}, {DType::i8, {4, 3, 2}},
      {DType::f8_e4m3, {9}}, {DType::u8, {6}},       {DType::i32, {5}},  {DType::i64, {3}},
      {DType::boolean, {4}}, {DType::f32, {}},       {DType::bf16, {0}}, {DType::i8, {2, 0, 3}},
  };
  int index = 0;
  for (const auto& [dtype, shape] : specs) {
    Tensor t = Tensor::zeros(shape, dtype);
    auto* bytes = static_cast<uint8_t*>(t.raw());
    if (dtype == DType::f32) {
      for (float& v : t.span<float>()) v = uniform(rng);
    } else if (dtype == DType::bf16) {
      for (uint16_t& v : t.span<uint16_t>()) v = f32_to_bf16(uniform(rng));
    } else if (dtype == DType::f16) {
      for (uint16_t& v : t.span<uint16_t>()) v = f32_to_f16(uniform(rng));
    } else if (dtype == DType::boolean) {
      for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = rng() & 1;
    } else {
      for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
    }
    tensors.emplace_back("t" + std::to_string(index++) + "." + std::string(dtype_name(dtype)), t);
  }
  TempDir dir;
  const std::string path = dir.file("round.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "ünïcode"}});

  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("note"), "ünïcode");
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const auto& [name, want] : tensors) expect_same_tensor(file.get(name), want, name);
}

TEST(Safetensors, TensorsAreZeroCopyViewsOfTheMapping) {
  TempDir dir;
  const std::string path = dir.file("zc.safetensors");
  write_safetensors(path, reference_tensors());
  Tensor w, n;
  size_t w_begin = 0, n_begin = 0;
  {
    const SafetensorsFile file = SafetensorsFile::open(path);
    w = file.get("w");
    n = file.get("n");
    w_begin = file.info("w").data_begin;
    n_begin = file.info("n").data_begin;
  }  // the tensors keep the mapping alive after the file object is gone
  EXPECT_TRUE(w.is_borrowed());
  EXPECT_TRUE(n.is_borrowed());
  EXPECT_EQ(static_cast<const std::byte*>(w.raw()) - static_cast<const std::byte*>(n.raw()),
            static_cast<ptrdiff_t>(w_begin - n_begin));
  EXPECT_EQ(w.span<float>()[1], -2.25f);
}

TEST(Safetensors, UnalignedDataIsReadable) {
  // Header length 57 puts the data at byte 65: not 4-byte aligned for the f32 tensor.
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append(57 - header.size(), ' ');
  std::string bytes = safetensors_bytes(header, 0);
  const float values[2] = {3.25f, -1.0f};
  bytes.append(reinterpret_cast<const char*>(values), sizeof(values));
  TempDir dir;
  write_bytes(dir.file("u.safetensors"), bytes);
  const Tensor t = SafetensorsFile::open(dir.file("u.safetensors")).get("a");
  float got[2];
  std::memcpy(got, t.raw(), sizeof(got));
  EXPECT_EQ(got[0], 3.25f);
  EXPECT_EQ(got[1], -1.0f);
}

TEST(Safetensors, EmptyHeaderObjectIsAValidFileWithNoTensors) {
  TempDir dir;
  write_bytes(dir.file("e.safetensors"), safetensors_bytes("{}", 0));
  EXPECT_TRUE(SafetensorsFile::open(dir.file("e.safetensors")).tensors().empty());
}

TEST(Safetensors, GapsBetweenTensorsAreTolerated) {
  TempDir dir;
  write_bytes(dir.file("g.safetensors"),
              safetensors_bytes(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                R"("b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
                                8));
  const SafetensorsFile file = SafetensorsFile::open(dir.file("g.safetensors"));
  EXPECT_EQ(file.get("b").span<uint8_t>()[0], static_cast<uint8_t>(6 * 37 + 11));
}

TEST(Safetensors, ParsesFromMemoryWithoutAFile) {
  const std::string bytes = from_hex(kReferenceHex);
  const SafetensorsHeader header = parse_safetensors_header(
      {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "<memory>");
  EXPECT_EQ(header.data_offset, 8u + 0x1e0u);
  EXPECT_EQ(header.tensors.size(), 8u);
}

TEST(Safetensors, UnknownTensorNameNamesFileAndTensor) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  write_safetensors(path, reference_tensors());
  const SafetensorsFile file = SafetensorsFile::open(path);
  expect_error([&] { file.get("missing.weight"); }, {path, "no tensor named \"missing.weight\""});
  expect_error([&] { file.info("missing.weight"); }, {path, "missing.weight"});
}

TEST(Safetensors, MissingFileNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("absent.safetensors");
  expect_error([&] { SafetensorsFile::open(path); }, {path, "cannot open"});
}

TEST(SafetensorsWriter, ReplacesExistingFileAndLeavesNoTemporaries) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_bytes(path, "old contents");
  write_safetensors(path, reference_tensors());
  EXPECT_EQ(SafetensorsFile::open(path).tensors().size(), 8u);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.str())) ++entries;
  EXPECT_EQ(entries, 1u);
  EXPECT_EQ(read_bytes(path).size() % 8, 4u);  // 8 + padded header + 60 data bytes
}

TEST(SafetensorsWriter, RejectsDuplicateAndReservedNames) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const Tensor t = Tensor::zeros({2}, DType::f32);
  expect_error([&] { write_safetensors(path, {{"a", t}, {"a", t}}); }, {path, "given twice"});
  expect_error([&] { write_safetensors(path, {{"__metadata__", t}}); }, {path, "__metadata__"});
  expect_error([&] { write_safetensors(path, {{"u", Tensor()}}); }, {path, "undefined"});
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsWriter, UnwritableDirectoryIsAnError) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/x.safetensors");
  expect_error([&] { write_safetensors(path, reference_tensors()); }, {path, "cannot create"});
}

}  // namespace
}  // namespace deepinfer::io
