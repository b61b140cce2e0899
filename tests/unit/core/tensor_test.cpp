#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/error.h"

namespace deepinfer {
namespace {

TEST(Tensor, ZerosIsAlignedContiguousAndZeroed) {
  Tensor t = Tensor::zeros({3, 5}, DType::f32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % Storage::kAlignment, 0u);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(t.strides(), (Shape{5, 1}));
  for (float v : t.span<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, ReshapeAndSliceShareStorage) {
  Tensor t = Tensor::zeros({4, 6}, DType::f32);
  for (int i = 0; i < 24; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor r = t.reshape({-1, 3});
  EXPECT_EQ(r.shape(), (Shape{8, 3}));
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 6}));
  EXPECT_EQ(rows.data<float>()[0], 6.0f);
  rows.data<float>()[0] = 100.0f;
  EXPECT_EQ(t.data<float>()[6], 100.0f);
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(t.slice_rows(2, 5), Error);
}

TEST(Tensor, ConvertsBetweenFloatTypes) {
  Tensor t = Tensor::zeros({4}, DType::f32);
  const float values[] = {1.0f, -2.5f, 0.15625f, 1000.0f};
  for (int i = 0; i < 4; ++i) t.data<float>()[i] = values[i];
  Tensor back = t.to(DType::bf16).to(DType::f32);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back.data<float>()[i], values[i]);
  Tensor half = t.to(DType::f16).to(DType::f32);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(half.data<float>()[i], values[i]);
}

TEST(Tensor, ViewOutsideStorageIsAnError) {
  auto storage = Storage::allocate(16);
  EXPECT_NO_THROW(Tensor::view(storage, 0, {4}, DType::f32));
  EXPECT_THROW(Tensor::view(storage, 4, {4}, DType::f32), Error);
  EXPECT_THROW(Tensor::view(storage, 0, {-1}, DType::f32), Error);
  EXPECT_THROW(shape_numel({INT64_MAX, 4}), Error);
}

TEST(Tensor, TypedSpanChecksElementSize) {
  Tensor t = Tensor::zeros({2}, DType::bf16);
  EXPECT_THROW((void)t.span<float>(), Error);
  EXPECT_EQ(t.span<uint16_t>().size(), 2u);
}

// Block dtypes: bytes come from the traits table's row bytes (hand-counted here: Q4_1 blocks
// are 20 bytes per 32 elements, Q8_0 34, Q4_0 18), never from an element size.
TEST(Tensor, BlockDtypesCountBytesPerRowOfBlocks) {
  EXPECT_EQ(Tensor::zeros({3, 64}, DType::q4_1).nbytes(), 3u * 2u * 20u);
  EXPECT_EQ(Tensor::zeros({2, 32}, DType::q8_0).nbytes(), 68u);
  EXPECT_EQ(Tensor::zeros({5, 96}, DType::q4_0).nbytes(), 5u * 3u * 18u);
  EXPECT_EQ(dtype_bytes(DType::q8_0, 64), 68u);
  EXPECT_EQ(dtype_bytes(DType::bf16, 7), 14u);  // element types as before
  EXPECT_TRUE(is_block_dtype(DType::q4_1));
  EXPECT_FALSE(is_block_dtype(DType::i8));
  EXPECT_EQ(Tensor::zeros({3, 64}, DType::q4_1).describe(), "q4_1[3, 64]");

  const Tensor t = Tensor::zeros({4, 64}, DType::q8_0);
  const Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(static_cast<const std::byte*>(rows.raw()) - static_cast<const std::byte*>(t.raw()), 68);
  EXPECT_EQ(rows.nbytes(), 2u * 68u);
  EXPECT_EQ(t.reshape({8, 32}).nbytes(), t.nbytes());
  EXPECT_EQ(t.clone().nbytes(), t.nbytes());
}

TEST(Tensor, BlockDtypesRefuseElementAccessAndPartialBlocks) {
  auto expect_error = [](auto f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error (expected one mentioning '" << needle << "')";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([] { (void)dtype_size(DType::q4_0); }, "no element size");
  expect_error([] { (void)Tensor::zeros({2, 48}, DType::q4_1); }, "whole 32-element blocks");
  expect_error(
      [] {
        (void)Tensor::zeros({2, 64}, DType::q8_0).reshape({8, 16});
      },
      "whole 32-element blocks");
  expect_error([] { (void)Tensor::zeros({1, 32}, DType::q8_0).span<int8_t>(); }, "no element type");
  expect_error(
      [] {
        (void)Tensor::zeros({1, 32}, DType::f32).to(DType::q8_0);
      },
      "quantizing to block types");
}

// A hand-made Q8_0 block (d = 0.5, q = e - 16) and Q4_1 block (d = 0.25, m = -1, nibbles):
// to(f32) decodes through the traits table, to(bf16) through f32.
TEST(Tensor, BlockDtypesDequantizeToFloatTypes) {
  Tensor q8 = Tensor::zeros({1, 32}, DType::q8_0);
  auto* b = static_cast<uint8_t*>(q8.raw());
  b[0] = 0x00;  // f16 0.5 = 0x3800
  b[1] = 0x38;
  for (int e = 0; e < 32; ++e) b[2 + e] = static_cast<uint8_t>(static_cast<int8_t>(e - 16));
  const Tensor f = q8.to(DType::f32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(f.data<float>()[e], 0.5f * static_cast<float>(e - 16));
  EXPECT_EQ(q8.to(DType::bf16).to(DType::f32).data<float>()[31], 7.5f);

  Tensor q4 = Tensor::zeros({1, 32}, DType::q4_1);
  auto* c = static_cast<uint8_t*>(q4.raw());
  c[0] = 0x00;  // f16 0.25 = 0x3400
  c[1] = 0x34;
  c[2] = 0x00;  // f16 -1 = 0xbc00
  c[3] = 0xbc;
  for (int j = 0; j < 16; ++j) c[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const Tensor g = q4.to(DType::f32);
  EXPECT_EQ(g.data<float>()[3], 0.25f * 3 - 1.0f);    // low nibble of byte 3
  EXPECT_EQ(g.data<float>()[19], 0.25f * 12 - 1.0f);  // high nibble of byte 3
}

}  // namespace
}  // namespace deepinfer
