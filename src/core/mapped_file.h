#pragma once
// A read-only view of a whole file (RAII): a memory mapping, or (MemoryOptions::mmap false,
// --no-mmap) the file read into anonymous memory. Tensors loaded from checkpoints point into
// it and keep it alive through a shared_ptr, so weights are never copied again.
#include <cstddef>
#include <memory>
#include <string>

#include "core/memory.h"

namespace deepinfer {

class MappedFile {
 public:
  // Throws Error naming the path and the OS reason when the file cannot be opened, mapped or
  // read. `memory`: mapping or reading, huge page advice and mlock (core/memory.h); an mlock
  // that fails is a warning (locked() is then false).
  static std::shared_ptr<MappedFile> open(const std::string& path,
                                          const MemoryOptions& memory = {});
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool mapped() const { return !anonymous_; }  // false: read into anonymous memory
  bool locked() const { return locked_; }
  // Drops this process's resident pages wholly inside [begin, begin + bytes) (RSS falls); a
  // later read faults them in from the file again, so the bytes seen never change (the
  // mapping is read-only and private: it has no pages of its own to lose). A no-op for
  // --no-mmap memory (it holds the only copy) and under --mlock (asked to stay resident). For
  // weights that were copied into another layout and are rarely or never read as stored.
  void release(const std::byte* begin, size_t bytes) const;

 private:
  MappedFile(std::string path, const std::byte* data, size_t size, bool anonymous)
      : path_(std::move(path)), data_(data), size_(size), anonymous_(anonymous) {}
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool anonymous_ = false;
  bool locked_ = false;
};

}  // namespace deepinfer
