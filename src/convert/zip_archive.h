#pragma once
// The entries of a zip archive as stored (uncompressed) byte ranges of a mapped file: what
// torch.save writes (it stores every record uncompressed, zip64 for large files). Compressed
// entries are refused with a message; nothing is ever extracted to disk.
#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "core/mapped_file.h"

namespace deepinfer::convert {

class ZipArchive {
 public:
  static ZipArchive open(const std::string& path);
  const std::string& path() const { return file_->path(); }
  const std::shared_ptr<MappedFile>& file() const { return file_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // The stored bytes of entry `name`; Error naming the archive and entry when absent.
  std::span<const std::byte> entry(const std::string& name) const;
  const std::map<std::string, std::span<const std::byte>>& entries() const { return entries_; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, std::span<const std::byte>> entries_;
};

}  // namespace deepinfer::convert
