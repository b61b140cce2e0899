#include "core/memory.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/log.h"

namespace deepinfer {
namespace {

// The bracketed word of a sysfs mode line: "always [madvise] never" -> "madvise".
std::string selected_mode(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "never";
  const auto open = line.find('[');
  const auto close = line.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "never";
  return line.substr(open + 1, close - open - 1);
}

size_t page_size() {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / double(1 << 20));
  return text;
}

std::string memlock_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "unknown";
  if (limit.rlim_cur == RLIM_INFINITY) return "unlimited";
  return mib(static_cast<size_t>(limit.rlim_cur));
}

}  // namespace

std::string thp_mode() {
  return selected_mode("/sys/kernel/mm/transparent_hugepage/enabled");
}

std::string thp_shmem_mode() {
  return selected_mode("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
}

bool advise_huge_pages(const void* data, size_t bytes) {
  const auto begin = round_up(reinterpret_cast<uintptr_t>(data), kHugePageBytes);
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) / kHugePageBytes * kHugePageBytes;
  if (end <= begin) return false;
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
}

bool lock_memory(const void* data, size_t bytes, const std::string& what) {
  if (bytes == 0 || ::mlock(data, bytes) == 0) return true;
  const int err = errno;
  log::warn("--mlock: cannot lock ", what, " (", mib(bytes), ") in memory: ", std::strerror(err),
            "; RLIMIT_MEMLOCK is ", memlock_limit(),
            " (`ulimit -l`): raise it (ulimit -l unlimited, or memlock in "
            "/etc/security/limits.conf) or run without --mlock; continuing unlocked");
  return false;
}

std::byte* map_anonymous(size_t bytes, bool huge_pages, const std::string& what) {
  const size_t size = round_up(bytes == 0 ? 1 : bytes, page_size());
  // Below one huge page there is nothing to align; above, map 2 MiB more and trim both ends
  // so that the buffer starts on a huge page boundary.
  const size_t slack = size >= kHugePageBytes ? kHugePageBytes : 0;
  void* mapped =
      ::mmap(nullptr, size + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED)
    fail("out of memory mapping ", mib(bytes), " for ", what, ": ", std::strerror(errno));
  auto* raw = static_cast<std::byte*>(mapped);
  auto* start = raw;
  if (slack != 0) {
    start =
        reinterpret_cast<std::byte*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePageBytes));
    const auto head = static_cast<size_t>(start - raw);
    if (head != 0) ::munmap(raw, head);
    if (slack - head != 0) ::munmap(start + size, slack - head);
  }
  if (huge_pages) advise_huge_pages(start, size);
  return start;
}

void release_anonymous(std::byte* data, size_t bytes) {
  if (data != nullptr) ::munmap(data, round_up(bytes == 0 ? 1 : bytes, page_size()));
}

bool keep_freed_heap_memory(size_t bytes) {
  const int value = static_cast<int>(std::min<size_t>(bytes, size_t{1} << 30));
  // glibc before 2.35 refuses an mmap threshold above 32 MiB: then 32 MiB, and false. The trim
  // threshold only after an accepted mmap threshold: setting either freezes the other (no
  // dynamic threshold), and a frozen default mmap threshold (128 KiB) would map more blocks.
  const bool full = ::mallopt(M_MMAP_THRESHOLD, value) == 1;
  if (!full && ::mallopt(M_MMAP_THRESHOLD, std::min(value, 32 << 20)) != 1) return false;
  return ::mallopt(M_TRIM_THRESHOLD, value) == 1 && full;
}

}  // namespace deepinfer
