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

void run_output_tiles(ThreadPool& pool, int64_t m, int64_t n, int64_t k, int64_t tile_n,
                      int64_t row_block,
                      const std::function<void(int64_t, int64_t, int64_t, int64_t)>& rows) {
  constexpr int64_t kMinMacsPerThread = int64_t{1} << 16;
  const int64_t n_tiles = (n + tile_n - 1) / tile_n;
  const int64_t m_blocks = (m + row_block - 1) / row_block;
  const int64_t macs_per_item = std::min(m, row_block) * tile_n * std::max<int64_t>(k, 1);
  const int64_t min_chunk = std::max<int64_t>(1, kMinMacsPerThread / macs_per_item);
  run_items_stealing(pool, n_tiles * m_blocks, min_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t nt = item / m_blocks, mb = item % m_blocks;
      rows(mb * row_block, std::min(m, (mb + 1) * row_block), nt * tile_n,
           std::min(n, (nt + 1) * tile_n));
    }
  });
}

}  // namespace deepinfer::kernels::detail
