#include "core/huge_page_arena.h"

#include <algorithm>
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

struct Arena {
  std::mutex mutex;
  std::shared_ptr<std::byte> region;  // the one being carved; older ones live while used
  size_t used = 0;
};

Arena& arena() {
  static Arena instance;
  return instance;
}

}  // namespace

std::shared_ptr<std::byte> allocate_huge_paged(size_t bytes, const std::string& what) {
  const size_t size = round_up(std::max<size_t>(bytes, 1), kAlignment);
  if (size > kArenaRegionBytes / 4) return map_alone(round_up(size, kHugePageBytes), what);
  Arena& a = arena();
  const std::lock_guard lock(a.mutex);
  if (!a.region || a.used + size > kArenaRegionBytes) {
    a.region = map_alone(kArenaRegionBytes, what);
    a.used = 0;
  }
  std::shared_ptr<std::byte> buffer(a.region, a.region.get() + a.used);  // shares the region
  a.used += size;
  return buffer;
}

}  // namespace deepinfer
