#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace deepinfer
