#include "core/huge_page_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "core/memory.h"

namespace deepinfer {
namespace {

constexpr size_t kAlignment = 64;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

std::shared_ptr<std::byte> map_alone(size_t bytes, const std::string& what) {
  std::byte* data = map_anonymous(bytes, true, what);
  return {data, [bytes](std::byte* p) { release_anonymous(p, bytes); }};
}

// The whole pages inside [data, data + bytes) back to the kernel (they read as zeros again):
// a freed buffer's neighbours in its region may live on, and its pages with them.
void drop_pages(std::byte* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = round_up(reinterpret_cast<uintptr_t>(data), page);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// A buffer handed out and still held: what huge_paged_in_use() reports.
struct Tracked {
  std::weak_ptr<std::byte> owner;
  const std::byte* data;
  size_t bytes;
};

struct Arena {
  std::mutex mutex;
  std::shared_ptr<std::byte> region;  // the one being carved; older ones live while used
  size_t used = 0;
  std::vector<Tracked> buffers;  // expired ones dropped as new ones come
};

Arena& arena() {
  static Arena instance;
  return instance;
}

}  // namespace

std::shared_ptr<std::byte> allocate_huge_paged(size_t bytes, const std::string& what) {
  const size_t size = round_up(std::max<size_t>(bytes, 1), kAlignment);
  std::shared_ptr<std::byte> buffer;
  Arena& a = arena();
  if (size > kArenaRegionBytes / 4) {
    buffer = map_alone(round_up(size, kHugePageBytes), what);
  } else {
    const std::lock_guard lock(a.mutex);
    if (!a.region || a.used + size > kArenaRegionBytes) {
      a.region = map_alone(kArenaRegionBytes, what);
      a.used = 0;
    }
    // Its own owner, which holds the region: freeing it gives its pages back, and the last
    // buffer of a region the arena has moved on from unmaps it (here, not when the tracking
    // weak_ptr lets the control block go).
    buffer = std::shared_ptr<std::byte>(a.region.get() + a.used,
                                        [region = a.region, size](std::byte* p) mutable {
                                          drop_pages(p, size);
                                          region.reset();
                                        });
    a.used += size;
  }
  const std::lock_guard lock(a.mutex);
  std::erase_if(a.buffers, [](const Tracked& t) { return t.owner.expired(); });
  a.buffers.push_back({buffer, buffer.get(), bytes});
  return buffer;
}

std::vector<MemoryRun> huge_paged_in_use() {
  Arena& a = arena();
  const std::lock_guard lock(a.mutex);
  std::vector<MemoryRun> runs;
  for (const Tracked& t : a.buffers) {
    if (auto owner = t.owner.lock()) runs.push_back({t.data, t.bytes, std::move(owner)});
  }
  return runs;
}

}  // namespace deepinfer
