#pragma once
// Tensor: shape, strides (in elements), dtype and a view into shared storage. Storage is
// either an owned 64-byte aligned buffer or a window of a memory-mapped checkpoint.
// Block-quantized dtypes (q8_0, q4_0, q4_1) keep the logical shape in elements; their last
// dimension is a whole number of blocks and every byte count goes through dtype_bytes().
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace deepinfer {

class MappedFile;
using Shape = std::vector<int64_t>;

class Storage {
 public:
  static constexpr size_t kAlignment = 64;
  // Owned, zero-initialised, 64-byte aligned bytes. With `huge_pages`, a buffer of at least
  // kHugePageBytes (core/memory.h) is mapped on its own, 2 MiB aligned, and advised for
  // transparent huge pages (the KV pool, big converted weights).
  static std::shared_ptr<Storage> allocate(size_t bytes, bool huge_pages = false);
  // Borrowed bytes kept alive by `owner` (e.g. a MappedFile).
  static std::shared_ptr<Storage> borrow(std::shared_ptr<const void> owner, const std::byte* data,
                                         size_t bytes);
  // Borrowed bytes of a read-only file mapping: as borrow(), and release_pages() can drop them.
  static std::shared_ptr<Storage> map(std::shared_ptr<const MappedFile> file, const std::byte* data,
                                      size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool owned() const { return owner_ == nullptr; }
  // Drops the resident pages of [begin, begin + bytes) when this is a file mapping
  // (MappedFile::release: the values stay); owned or other borrowed bytes are left as they are.
  void release_pages(const std::byte* begin, size_t bytes) const;
  // Whether release_pages() drops anything: a file mapping, not --no-mmap memory nor --mlock.
  bool pages_releasable() const;

 private:
  Storage(std::byte* data, size_t size, std::shared_ptr<const void> owner, bool mapped = false)
      : data_(data), size_(size), owner_(std::move(owner)), mapped_(mapped) {}
  std::byte* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
  bool mapped_ = false;               // owned by map_anonymous (core/memory.h), not aligned_alloc
  const MappedFile* file_ = nullptr;  // set by map(); owner_ keeps it alive
};

class Tensor {
 public:
  Tensor() = default;
  // New owned, zero-filled, contiguous tensor (`huge_pages`: see Storage::allocate).
  static Tensor zeros(Shape shape, DType dtype, bool huge_pages = false);
  // Contiguous view of `storage` starting at byte `offset`; checks that it fits.
  static Tensor view(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int axis) const;  // negative axes count from the end
  int64_t numel() const;
  size_t nbytes() const { return dtype_bytes(dtype_, numel()); }
  bool is_contiguous() const;
  bool is_borrowed() const { return storage_ && !storage_->owned(); }
  // Whether release_pages() drops anything (Storage::pages_releasable).
  bool pages_releasable() const { return storage_ && storage_->pages_releasable(); }
  // Drops the resident pages of this view's bytes when it views a file mapping (the values
  // stay: they are read from the file again if touched); see Storage::release_pages.
  void release_pages() const {
    if (storage_) storage_->release_pages(storage_->data() + offset_, nbytes());
  }

  void* raw() const { return storage_ ? storage_->data() + offset_ : nullptr; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  // Typed contiguous span; checks dtype size and contiguity (Error for block dtypes).
  template <typename T>
  std::span<T> span() const {
    check_span(sizeof(T));
    return {data<T>(), static_cast<size_t>(numel())};
  }

  // Same data, new shape (contiguous tensors only; one -1 is inferred).
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) along axis 0, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Contiguous copy converted to `dtype` (f32/f16/bf16/f8 and block sources, block ones
  // dequantized by the traits table; block targets are an Error); shares data if no-op.
  Tensor to(DType dtype) const;
  // Deep contiguous copy.
  Tensor clone() const;

  std::string describe() const;  // "bf16[4096, 11008]"

 private:
  void check_span(size_t element_size) const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::f32;
};

std::string shape_to_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);  // throws Error on negative dims or overflow

}  // namespace deepinfer
