#include "kernels/linear_schedule.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace deepinfer::kernels::detail {
namespace {

// One thread's share [next, end); padded to a cache line so threads do not false-share.
struct alignas(64) Share {
  std::atomic<int64_t> next{0};
  int64_t end = 0;
};

// Grabs up to `grab` items from the front of `share`; false when it is empty.
bool take(Share& share, int64_t grab, int64_t& begin, int64_t& end) {
  if (share.next.load(std::memory_order_relaxed) >= share.end) return false;
  begin = share.next.fetch_add(grab, std::memory_order_relaxed);
  if (begin >= share.end) return false;
  end = std::min(share.end, begin + grab);
  return true;
}

}  // namespace

void run_items_stealing(ThreadPool& pool, int64_t items, int64_t min_chunk,
                        const std::function<void(int64_t, int64_t)>& body) {
  if (items <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t lanes = std::min<int64_t>(pool.size(), items / min_chunk);
  if (lanes <= 1) {
    body(0, items);
    return;
  }
  const auto shares = std::make_unique<Share[]>(static_cast<size_t>(lanes));
  for (int64_t l = 0; l < lanes; ++l) {
    shares[l].next.store(items * l / lanes, std::memory_order_relaxed);
    shares[l].end = items * (l + 1) / lanes;
  }
  // Small grabs balance well; each costs one atomic and, for decode, one cold weight tile
  // where the prefetch chain restarts, so an owner's run is cut only where a thief took one.
  const int64_t grab = std::max(min_chunk, items / (lanes * 16));
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end) {
    for (int64_t lane = lane_begin; lane < lane_end; ++lane) {
      int64_t begin = 0, end = 0;
      while (take(shares[lane], grab, begin, end)) body(begin, end);
      // Then help the others, nearest share first.
      for (int64_t d = 1; d < lanes; ++d) {
        Share& other = shares[(lane + d) % lanes];
        while (take(other, grab, begin, end)) body(begin, end);
      }
    }
  });
}

}  // namespace deepinfer::kernels::detail
