#include "core/mapped_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace deepinfer {
namespace {

// The whole file into `out` with pread (short reads and EINTR retried).
void read_all(int fd, const std::string& path, std::byte* out, size_t size) {
  size_t done = 0;
  while (done < size) {
    const size_t chunk = std::min<size_t>(size - done, size_t{1} << 30);
    const ssize_t got = ::pread(fd, out + done, chunk, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path, ": cannot read (--no-mmap): ", std::strerror(errno));
    if (got == 0) fail(path, ": file shrank while being read (--no-mmap), at byte ", done);
    done += static_cast<size_t>(got);
  }
}

// Whether the kernel may back a mapping of this file with huge pages: a tmpfs file (/dev/shm)
// follows shmem_enabled; other files need THP on ("always" or "madvise") and a file system
// with large folios (or CONFIG_READ_ONLY_THP_FOR_FS), which only the kernel knows, so they
// are advised and it decides.
bool file_may_use_huge_pages(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    const std::string shmem = thp_shmem_mode();
    return shmem == "always" || shmem == "within_size" || shmem == "advise" || shmem == "force";
  }
  return thp_mode() != "never";
}

}  // namespace

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path, const MemoryOptions& memory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  const auto size = static_cast<size_t>(info.st_size);
  const std::byte* data = nullptr;
  if (size > 0 && memory.mmap) {
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(path, ": cannot map into memory: ", std::strerror(err));
    }
    // Honoured where the file system keeps large folios (or CONFIG_READ_ONLY_THP_FOR_FS);
    // elsewhere the kernel ignores or refuses it, which costs nothing.
    if (memory.huge_pages && file_may_use_huge_pages(fd)) advise_huge_pages(mapped, size);
    data = static_cast<const std::byte*>(mapped);
  } else if (size > 0) {
    std::byte* buffer = nullptr;
    try {
      buffer = map_anonymous(size, memory.huge_pages, path + " (--no-mmap)");
      read_all(fd, path, buffer, size);
    } catch (...) {
      release_anonymous(buffer, size);
      ::close(fd);
      throw;
    }
    data = buffer;
  }
  ::close(fd);
  std::shared_ptr<MappedFile> file(new MappedFile(path, data, size, !memory.mmap));
  if (memory.mlock && size > 0) file->locked_ = lock_memory(data, size, path);
  return file;
}

void MappedFile::release(const std::byte* begin, size_t bytes) const {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  const auto first = reinterpret_cast<uintptr_t>(data_);
  DI_CHECK(begin >= data_ && begin + bytes <= data_ + size_, path_,
           ": release of bytes outside the mapping");
  // MADV_DONTNEED would zero anonymous pages (--no-mmap: the only copy); locked pages stay.
  if (anonymous_ || locked_) return;
  // Advice only: a refusal leaves the pages resident, which is still correct.
  if (hi > lo && lo >= first) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  if (anonymous_) {
    release_anonymous(const_cast<std::byte*>(data_), size_);
  } else {
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
}

}  // namespace deepinfer
