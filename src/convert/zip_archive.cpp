#include "convert/zip_archive.h"

#include <cstdint>

#include "core/error.h"

// Layout (PKWARE APPNOTE 6.3): the end-of-central-directory record (EOCD, signature
// 0x06054b50) in the last 64 KiB + 22 bytes, for zip64 preceded by a locator (0x07064b50)
// pointing at the zip64 EOCD (0x06064b50); the central directory's entries (0x02014b50) give
// each file's sizes, compression and local header offset; zip64 sizes / offsets are in the
// entry's extra field 0x0001 when the 32-bit fields hold 0xffffffff.

namespace deepinfer::convert {
namespace {

struct Reader {
  std::span<const std::byte> bytes;
  const std::string& path;

  void need(uint64_t offset, uint64_t size, const char* what) const {
    if (offset > bytes.size() || size > bytes.size() - offset) {
      fail(path, ": zip ", what, " at byte ", offset, " runs past the end of the file (",
           bytes.size(), " bytes); the file is truncated or not a torch.save archive");
    }
  }
  uint64_t le(uint64_t offset, int size) const {
    need(offset, static_cast<uint64_t>(size), "field");
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; --i)
      value = (value << 8) | static_cast<uint8_t>(bytes[offset + static_cast<uint64_t>(i)]);
    return value;
  }
};

}  // namespace

ZipArchive ZipArchive::open(const std::string& path) {
  ZipArchive archive;
  archive.file_ = MappedFile::open(path);
  const Reader r{{archive.file_->data(), archive.file_->size()}, path};
  const uint64_t size = r.bytes.size();
  if (size < 22) fail(path, ": ", size, " bytes, too short for a zip archive (torch.save format)");
  uint64_t eocd = size - 22;
  const uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  while (r.le(eocd, 4) != 0x06054b50) {
    if (eocd == lowest) {
      fail(path,
           ": no zip end-of-central-directory record; this is not a torch.save archive "
           "(legacy pre-1.6 torch.save files are not supported: re-save with a newer torch)");
    }
    --eocd;
  }
  uint64_t entries = r.le(eocd + 10, 2);
  uint64_t dir_offset = r.le(eocd + 16, 4);
  if (eocd >= 20 && r.le(eocd - 20, 4) == 0x07064b50) {
    const uint64_t zip64 = r.le(eocd - 20 + 8, 8);
    if (r.le(zip64, 4) != 0x06064b50) fail(path, ": bad zip64 end-of-central-directory record");
    entries = r.le(zip64 + 32, 8);
    dir_offset = r.le(zip64 + 48, 8);
  }
  uint64_t at = dir_offset;
  for (uint64_t i = 0; i < entries; ++i) {
    if (r.le(at, 4) != 0x02014b50) fail(path, ": bad zip central directory entry ", i);
    const uint64_t method = r.le(at + 10, 2);
    uint64_t compressed = r.le(at + 20, 4);
    uint64_t uncompressed = r.le(at + 24, 4);
    const uint64_t name_len = r.le(at + 28, 2);
    const uint64_t extra_len = r.le(at + 30, 2);
    const uint64_t comment_len = r.le(at + 32, 2);
    uint64_t local = r.le(at + 42, 4);
    r.need(at + 46, name_len, "file name");
    const std::string name(reinterpret_cast<const char*>(r.bytes.data() + at + 46), name_len);
    // zip64 extended information: the fields that overflowed, in this order.
    for (uint64_t e = at + 46 + name_len; e + 4 <= at + 46 + name_len + extra_len;) {
      const uint64_t id = r.le(e, 2), len = r.le(e + 2, 2);
      if (id == 0x0001) {
        uint64_t p = e + 4;
        if (uncompressed == 0xffffffffu) uncompressed = r.le(p, 8), p += 8;
        if (compressed == 0xffffffffu) compressed = r.le(p, 8), p += 8;
        if (local == 0xffffffffu) local = r.le(p, 8);
      }
      e += 4 + len;
    }
    if (method != 0 || compressed != uncompressed) {
      fail(path, ": zip entry \"", name, "\" is compressed (method ", method,
           "); torch.save stores entries uncompressed, so this file was not written by it");
    }
    if (r.le(local, 4) != 0x04034b50) fail(path, ": bad zip local header of \"", name, "\"");
    const uint64_t data = local + 30 + r.le(local + 26, 2) + r.le(local + 28, 2);
    r.need(data, compressed, "entry data");
    archive.entries_[name] = r.bytes.subspan(data, compressed);
    at += 46 + name_len + extra_len + comment_len;
  }
  return archive;
}

std::span<const std::byte> ZipArchive::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) fail(path(), ": no zip entry \"", name, "\"");
  return it->second;
}

}  // namespace deepinfer::convert
