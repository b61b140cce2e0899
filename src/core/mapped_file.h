#pragma once
// A read-only memory mapping of a whole file (RAII). Tensors loaded from checkpoints point
// into it and keep it alive through a shared_ptr, so weights are never copied.
#include <cstddef>
#include <memory>
#include <string>

namespace deepinfer {

class MappedFile {
 public:
  // Throws Error naming the path and the OS reason when the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops this process's resident pages wholly inside [begin, begin + bytes) (RSS falls); a
  // later read faults them in from the file again, so the bytes seen never change (the
  // mapping is read-only and private: it has no pages of its own to lose). For weights that
  // were copied into another layout and are rarely or never read as stored.
  void release(const std::byte* begin, size_t bytes) const;

 private:
  MappedFile(std::string path, const std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deepinfer
