#pragma once
// Activation buffers of the forward pass, reused instead of reallocated. A layer's big
// buffers (a 1024-token step's MLP outputs are 20-40 MB) came from std::vector: glibc maps
// blocks above its mmap threshold afresh and trims freed heap tops, so every layer of every
// step page-faulted and zeroed them again (14 % of a prefill's samples). ScratchFloats takes
// its block from a cache of the calling thread's freed blocks (anonymous mappings, huge pages
// advised) and gives it back when destroyed, so a step reuses the previous step's memory: the
// peak activation memory stays resident, as llama.cpp's compute buffer does. Small buffers are
// plain heap allocations. Per thread, no locking: the engine's step thread runs the forward
// pass; the pool's workers never allocate activations. A buffer destroyed on another thread
// than its own goes to that thread's cache; none may outlive its thread (no static or
// thread_local ScratchFloats).
#include <cstddef>
#include <memory>

namespace deepinfer {

class ScratchFloats {
 public:
  ScratchFloats() = default;
  // n floats, zero-filled (as std::vector<float>(n)).
  explicit ScratchFloats(size_t n) : ScratchFloats(n, true) {}
  // n floats whose values are unspecified: for buffers the caller overwrites whole.
  static ScratchFloats uninitialized(size_t n) { return ScratchFloats(n, false); }

  ScratchFloats(ScratchFloats&& other) noexcept;
  ScratchFloats& operator=(ScratchFloats&& other) noexcept;
  ScratchFloats(const ScratchFloats&) = delete;
  ScratchFloats& operator=(const ScratchFloats&) = delete;
  ~ScratchFloats();

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  float& operator[](size_t i) { return data_[i]; }
  const float& operator[](size_t i) const { return data_[i]; }
  float* begin() { return data_; }
  float* end() { return data_ + size_; }
  const float* begin() const { return data_; }
  const float* end() const { return data_ + size_; }

  // Buffers of at least this many bytes come from the thread's block cache.
  static constexpr size_t kCachedFromBytes = size_t{256} << 10;
  // Freed blocks a thread keeps, in bytes; beyond it the largest are unmapped. A request
  // reuses a cached block of at most twice its size.
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;
  // Bytes of freed blocks the calling thread holds now (tests, diagnostics).
  static size_t cached_bytes();

 private:
  ScratchFloats(size_t n, bool zeroed);
  void release();

  float* data_ = nullptr;
  size_t size_ = 0;
  size_t block_bytes_ = 0;  // > 0: data_ is a cached block of this many bytes
  std::unique_ptr<float[]> heap_;
};

}  // namespace deepinfer
