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

 private:
  MappedFile(std::string path, const std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deepinfer
