#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/memory.h"
#include "core/quant_blocks.h"

namespace deepinfer {

std::shared_ptr<Storage> Storage::allocate(size_t bytes, bool huge_pages) {
  if (huge_pages && bytes >= kHugePageBytes) {  // zero-filled by the kernel, faulted lazily
    return std::shared_ptr<Storage>(
        new Storage(map_anonymous(bytes, true, "a tensor"), bytes, nullptr, true));
  }
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (data == nullptr) fail("out of memory allocating ", bytes, " bytes");
  std::memset(data, 0, rounded == 0 ? kAlignment : rounded);
  return std::shared_ptr<Storage>(new Storage(static_cast<std::byte*>(data), bytes, nullptr));
}

std::shared_ptr<Storage> Storage::borrow(std::shared_ptr<const void> owner, const std::byte* data,
                                         size_t bytes) {
  DI_CHECK(owner != nullptr, "Storage::borrow needs an owner");
  return std::shared_ptr<Storage>(
      new Storage(const_cast<std::byte*>(data), bytes, std::move(owner)));
}

std::shared_ptr<Storage> Storage::map(std::shared_ptr<const MappedFile> file, const std::byte* data,
                                      size_t bytes) {
  const MappedFile* raw = file.get();
  std::shared_ptr<Storage> storage = borrow(std::move(file), data, bytes);
  storage->file_ = raw;
  return storage;
}

void Storage::release_pages(const std::byte* begin, size_t bytes) const {
  if (file_ != nullptr) file_->release(begin, bytes);
}

bool Storage::pages_releasable() const {
  return file_ != nullptr && file_->mapped() && !file_->locked();
}

Storage::~Storage() {
  if (owner_ != nullptr) return;
  if (mapped_) {
    release_anonymous(data_, size_);
  } else {
    std::free(data_);
  }
}

int64_t shape_numel(const Shape& shape) {
  int64_t total = 1;
  for (int64_t d : shape) {
    DI_CHECK(d >= 0, "negative dimension in shape ", shape_to_string(shape));
    if (d != 0 && total > std::numeric_limits<int64_t>::max() / d) {
      fail("shape ", shape_to_string(shape), " has too many elements");
    }
    total *= d;
  }
  return total;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

static Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

// Block dtypes need whole blocks along the last dimension, so that every row (and every
// multiple of it) has a byte size.
static void check_block_shape(const Shape& shape, DType dtype) {
  const QuantTraits* traits = block_traits(dtype);
  if (traits == nullptr) return;
  DI_CHECK(!shape.empty() && shape.back() % traits->block_size == 0, "a ", dtype_name(dtype),
           " tensor needs a last dimension of whole ", traits->block_size,
           "-element blocks, got shape ", shape_to_string(shape));
}

Tensor Tensor::zeros(Shape shape, DType dtype, bool huge_pages) {
  const int64_t n = shape_numel(shape);
  check_block_shape(shape, dtype);
  auto storage = Storage::allocate(dtype_bytes(dtype, n), huge_pages);
  return view(std::move(storage), 0, std::move(shape), dtype);
}

Tensor Tensor::view(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype) {
  const int64_t n = shape_numel(shape);
  check_block_shape(shape, dtype);
  const size_t bytes = dtype_bytes(dtype, n);
  DI_CHECK(storage != nullptr, "tensor view of null storage");
  DI_CHECK(offset <= storage->size() && bytes <= storage->size() - offset, "tensor view ",
           dtype_name(dtype), shape_to_string(shape), " at byte ", offset,
           " exceeds its storage of ", storage->size(), " bytes");
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = offset;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

int64_t Tensor::dim(int axis) const {
  const int n = ndim();
  const int index = axis < 0 ? axis + n : axis;
  DI_CHECK(index >= 0 && index < n, "axis ", axis, " out of range for ", describe());
  return shape_[static_cast<size_t>(index)];
}

int64_t Tensor::numel() const {
  int64_t total = 1;
  for (int64_t d : shape_) total *= d;
  return total;
}

bool Tensor::is_contiguous() const {
  return strides_ == contiguous_strides(shape_);
}

void Tensor::check_span(size_t element_size) const {
  DI_CHECK(!is_block_dtype(dtype_), "typed access of ", describe(),
           ": a block-quantized tensor has no element type (read its rows as bytes)");
  DI_CHECK(element_size == dtype_size(dtype_), "typed access of ", describe(),
           " with an element of ", element_size, " bytes");
  DI_CHECK(is_contiguous(), "contiguous access of a strided tensor ", describe());
}

Tensor Tensor::reshape(Shape shape) const {
  DI_CHECK(is_contiguous(), "reshape of a strided tensor ", describe());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      DI_CHECK(infer < 0, "reshape with two -1 dimensions");
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    DI_CHECK(known > 0 && numel() % known == 0, "cannot reshape ", describe(), " to ",
             shape_to_string(shape));
    shape[static_cast<size_t>(infer)] = numel() / known;
  }
  DI_CHECK(shape_numel(shape) == numel(), "cannot reshape ", describe(), " to ",
           shape_to_string(shape));
  return view(storage_, offset_, std::move(shape), dtype_);
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  DI_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "rows [", begin, ", ",
           end, ") out of range for ", describe());
  DI_CHECK(is_contiguous(), "slice_rows of a strided tensor ", describe());
  Shape shape = shape_;
  shape[0] = end - begin;
  const size_t row_bytes = dtype_bytes(dtype_, strides_[0]);
  return view(storage_, offset_ + static_cast<size_t>(begin) * row_bytes, std::move(shape), dtype_);
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  DI_CHECK(is_contiguous(), "dtype conversion of a strided tensor ", describe());
  DI_CHECK(!is_block_dtype(dtype), "cannot convert ", describe(), " to ", dtype_name(dtype),
           ": quantizing to block types is not supported");
  Tensor out = zeros(shape_, dtype);
  const auto n = static_cast<size_t>(numel());
  if (const QuantTraits* traits = block_traits(dtype_); traits && dtype == DType::f32) {
    const int64_t row = shape_.back();
    const size_t row_bytes = dtype_bytes(dtype_, row);
    const auto* src = static_cast<const std::byte*>(raw());
    float* dst = out.data<float>();
    for (int64_t r = 0; row > 0 && r < numel() / row; ++r)
      traits->dequantize_row(src + static_cast<size_t>(r) * row_bytes, dst + r * row, row);
  } else if (dtype == DType::f32) {
    convert_to_f32(raw(), dtype_, out.data<float>(), n);
  } else {
    Tensor f32 = to(DType::f32);
    convert_from_f32(f32.data<float>(), out.raw(), dtype, n);
  }
  return out;
}

Tensor Tensor::clone() const {
  DI_CHECK(is_contiguous(), "clone of a strided tensor ", describe());
  Tensor out = zeros(shape_, dtype_);
  if (nbytes() > 0) std::memcpy(out.raw(), raw(), nbytes());
  return out;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_to_string(shape_);
}

}  // namespace deepinfer
