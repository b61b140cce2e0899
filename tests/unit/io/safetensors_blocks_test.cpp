// Block types in safetensors (deepinfer convert's output): dtype names Q8_0 ... Q6_K with the
// logical [rows, cols] shape, rows x row bytes of data, checked; aligned writing.
#include <gtest/gtest.h>

#include <cstring>

#include "core/quant_blocks.h"
#include "io/safetensors.h"
#include "test_files.h"

namespace deepinfer::io {
namespace {

using testing::expect_error;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::write_bytes;

TEST(SafetensorsBlocks, ReadsBlockTypesWithTheirLogicalShape) {
  // Q8_0 [2, 64]: 2 rows x 2 blocks x 34 bytes; Q4_K [1, 256]: one 144-byte super-block.
  const std::string header = R"({"a":{"dtype":"Q8_0","shape":[2,64],"data_offsets":[0,136]},)"
                             R"("b":{"dtype":"Q4_K","shape":[1,256],"data_offsets":[136,280]}})";
  TempDir dir;
  write_bytes(dir.file("m.safetensors"), safetensors_bytes(header, 280));
  const SafetensorsFile file = SafetensorsFile::open(dir.file("m.safetensors"));
  EXPECT_EQ(file.info("a").dtype, DType::q8_0);
  EXPECT_EQ(file.get("a").shape(), (Shape{2, 64}));
  EXPECT_EQ(file.get("a").nbytes(), 136u);
  EXPECT_EQ(file.info("b").dtype, DType::q4_k);
}

TEST(SafetensorsBlocks, RefusesRowsThatAreNotWholeBlocksOrTheWrongByteCount) {
  TempDir dir;
  write_bytes(
      dir.file("partial.safetensors"),
      safetensors_bytes(R"({"a":{"dtype":"Q8_0","shape":[2,48],"data_offsets":[0,102]}})", 102));
  expect_error([&] { SafetensorsFile::open(dir.file("partial.safetensors")); },
               {"tensor \"a\"", "not whole 32-element Q8_0 blocks"});
  write_bytes(
      dir.file("bytes.safetensors"),
      safetensors_bytes(R"({"a":{"dtype":"Q4_0","shape":[2,32],"data_offsets":[0,32]}})", 32));
  expect_error([&] { SafetensorsFile::open(dir.file("bytes.safetensors")); },
               {"tensor \"a\"", "hold 32 bytes", "needs 36"});
}

TEST(SafetensorsBlocks, AlignedWritingStartsDataAndBlockTensorsAt64Bytes) {
  Tensor norm = Tensor::zeros({3}, DType::f32);  // 12 bytes: the next tensor would be unaligned
  Tensor q = Tensor::zeros({2, 64}, DType::q8_0);
  auto* bytes = static_cast<unsigned char*>(q.raw());
  for (size_t i = 0; i < q.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);
  TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {{"norm", norm}, {"q", q}}, {{"k", "v"}}, 64);
  const SafetensorsFile file = SafetensorsFile::open(dir.file("m.safetensors"));
  EXPECT_EQ(file.info("q").data_begin % 64, 0u);
  EXPECT_EQ((file.info("norm").data_begin - 8) % 8, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(file.get("q").raw()) % 64, 0u);
  EXPECT_EQ(std::memcmp(file.get("q").raw(), q.raw(), q.nbytes()), 0);
  EXPECT_EQ(file.metadata().at("k"), "v");
}

}  // namespace
}  // namespace deepinfer::io
