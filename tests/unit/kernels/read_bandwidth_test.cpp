// kernels::read_bandwidth over the huge-paged weights in use (core/huge_page_arena.h), what
// `generate --measure-bandwidth` reads: the buffers handed out and still held, and only those.
#include "kernels/read_bandwidth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/huge_page_arena.h"
#include "kernel_test_util.h"
#include "kernels/isa.h"

namespace deepinfer::kernels {
namespace {

bool covers(const std::vector<MemoryRun>& runs, const std::byte* data, size_t bytes) {
  return std::any_of(runs.begin(), runs.end(), [&](const MemoryRun& r) {
    return r.data <= data && data + bytes <= r.data + r.bytes;
  });
}

TEST(ReadBandwidth, TheRunsInUseAreTheBuffersStillHeld) {
  const size_t big = kArenaRegionBytes / 2;  // mapped alone
  auto alone = allocate_huge_paged(big, "test");
  auto carved = allocate_huge_paged(3000, "test");
  {
    const std::vector<MemoryRun> runs = huge_paged_in_use();
    EXPECT_TRUE(covers(runs, alone.get(), big));
    EXPECT_TRUE(covers(runs, carved.get(), 3000));
    const std::byte* held = carved.get();
    carved.reset();
    EXPECT_TRUE(covers(huge_paged_in_use(), held, 3000));  // `runs` keeps it alive
  }
  const std::byte* gone = alone.get();
  alone.reset();
  for (const MemoryRun& r : huge_paged_in_use()) EXPECT_NE(r.data, gone);
}

TEST(ReadBandwidth, ReadsEveryIsaAndSplitsTheRunsOverTheThreads) {
  auto buffer = allocate_huge_paged(size_t{24} << 20, "test");
  const std::vector<MemoryRun> runs{{buffer.get(), size_t{16} << 20, buffer},
                                    {buffer.get() + (size_t{16} << 20), size_t{8} << 20, buffer}};
  for (Isa isa : supported_isas()) {
    testing::IsaGuard guard(isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      const double gb_s = read_bandwidth(runs, pool, 2);
      EXPECT_TRUE(std::isfinite(gb_s) && gb_s > 0.0) << isa_name(isa) << ", " << threads;
    }
  }
  ThreadPool pool(2);
  EXPECT_EQ(read_bandwidth({}, pool), 0.0);
}

}  // namespace
}  // namespace deepinfer::kernels
