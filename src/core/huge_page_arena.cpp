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

// A mapping handed out (a region, or a buffer mapped alone) and how much of it is in use.
struct Tracked {
  std::weak_ptr<std::byte> owner;
  const std::byte* data;
  size_t bytes;
};

struct Arena {
  std::mutex mutex;
  std::shared_ptr<std::byte> region;  // the one being carved; older ones live while used
  size_t used = 0;
  std::vector<Tracked> mappings;  // expired ones dropped as new ones come
};

Arena& arena() {
  static Arena instance;
  return instance;
}

}  // namespace

std::shared_ptr<std::byte> allocate_huge_paged(size_t bytes, const std::string& what) {
  const size_t size = round_up(std::max<size_t>(bytes, 1), kAlignment);
  Arena& a = arena();
  const auto track = [&a](const std::shared_ptr<std::byte>& owner, size_t in_use) {
    std::erase_if(a.mappings, [](const Tracked& t) { return t.owner.expired(); });
    a.mappings.push_back({owner, owner.get(), in_use});
  };
  if (size > kArenaRegionBytes / 4) {
    auto alone = map_alone(round_up(size, kHugePageBytes), what);
    const std::lock_guard lock(a.mutex);
    track(alone, bytes);
    return alone;
  }
  const std::lock_guard lock(a.mutex);
  if (!a.region || a.used + size > kArenaRegionBytes) {
    a.region = map_alone(kArenaRegionBytes, what);
    a.used = 0;
    track(a.region, 0);
  }
  std::shared_ptr<std::byte> buffer(a.region, a.region.get() + a.used);  // shares the region
  a.used += size;
  for (Tracked& t : a.mappings)
    if (t.data == a.region.get()) t.bytes = a.used;
  return buffer;
}

std::vector<MemoryRun> huge_paged_in_use() {
  Arena& a = arena();
  const std::lock_guard lock(a.mutex);
  std::vector<MemoryRun> runs;
  for (const Tracked& t : a.mappings) {
    // The current region is held by the arena itself: in use only while a buffer shares it.
    const auto owners = t.owner.use_count() - (t.data == a.region.get() ? 1 : 0);
    if (owners > 0 && t.bytes > 0) runs.push_back({t.data, t.bytes});
  }
  return runs;
}

}  // namespace deepinfer
