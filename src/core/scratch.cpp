#include "core/scratch.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/memory.h"

namespace deepinfer {
namespace {

struct Block {
  std::byte* data;
  size_t bytes;
  bool fresh;  // a new mapping: already zero
};

// The calling thread's freed blocks, smallest first.
class BlockCache {
 public:
  ~BlockCache() {
    for (const Block& b : free_) release_anonymous(b.data, b.bytes);
  }
  // The smallest cached block of at least `bytes` and at most twice its rounded size (a small
  // request does not pin a large block), else a new mapping (2 MiB multiples, so that huge
  // pages back it and nearby sizes share blocks).
  Block take(size_t bytes) {
    const size_t size = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    const auto fit = std::lower_bound(free_.begin(), free_.end(), bytes,
                                      [](const Block& b, size_t n) { return b.bytes < n; });
    if (fit != free_.end() && fit->bytes <= 2 * size) {
      const Block b = *fit;
      free_.erase(fit);
      held_ -= b.bytes;
      return {b.data, b.bytes, false};
    }
    return {map_anonymous(size, true, "activation buffer"), size, true};
  }
  // Keeps b for reuse; beyond kMaxCachedBytes the largest blocks are unmapped. Never throws
  // (it runs in destructors): without room to record b, b is unmapped.
  void give(Block b) noexcept {
    try {
      free_.insert(std::lower_bound(free_.begin(), free_.end(), b.bytes,
                                    [](const Block& x, size_t n) { return x.bytes < n; }),
                   b);
    } catch (...) {
      release_anonymous(b.data, b.bytes);
      return;
    }
    held_ += b.bytes;
    while (held_ > ScratchFloats::kMaxCachedBytes) {
      held_ -= free_.back().bytes;
      release_anonymous(free_.back().data, free_.back().bytes);
      free_.pop_back();
    }
  }
  size_t held() const { return held_; }

 private:
  std::vector<Block> free_;
  size_t held_ = 0;
};

BlockCache& cache() {
  thread_local BlockCache blocks;
  return blocks;
}

}  // namespace

ScratchFloats::ScratchFloats(size_t n, bool zeroed) : size_(n) {
  if (n == 0) return;
  const size_t bytes = n * sizeof(float);
  if (bytes < kCachedFromBytes) {
    heap_.reset(zeroed ? new float[n]() : new float[n]);
    data_ = heap_.get();
    return;
  }
  const Block b = cache().take(bytes);
  data_ = reinterpret_cast<float*>(b.data);
  block_bytes_ = b.bytes;
  if (zeroed && !b.fresh) std::memset(data_, 0, bytes);
}

ScratchFloats::ScratchFloats(ScratchFloats&& other) noexcept
    : data_(other.data_),
      size_(other.size_),
      block_bytes_(other.block_bytes_),
      heap_(std::move(other.heap_)) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.block_bytes_ = 0;
}

ScratchFloats& ScratchFloats::operator=(ScratchFloats&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    size_ = other.size_;
    block_bytes_ = other.block_bytes_;
    heap_ = std::move(other.heap_);
    other.data_ = nullptr;
    other.size_ = 0;
    other.block_bytes_ = 0;
  }
  return *this;
}

ScratchFloats::~ScratchFloats() {
  release();
}

void ScratchFloats::release() {
  if (block_bytes_ != 0) cache().give({reinterpret_cast<std::byte*>(data_), block_bytes_, false});
  heap_.reset();
  data_ = nullptr;
  size_ = 0;
  block_bytes_ = 0;
}

size_t ScratchFloats::cached_bytes() {
  return cache().held();
}

}  // namespace deepinfer
