#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/error.h"

namespace deepinfer {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, RespectsMinChunkAndRunsNestedCallsInline) {
  ThreadPool pool(4);
  std::atomic<int> chunks{0};
  pool.parallel_for(
      10,
      [&](int64_t begin, int64_t end) {
        chunks++;
        EXPECT_TRUE(end - begin >= 5);
        int inner = 0;
        pool.parallel_for(3, [&](int64_t b, int64_t e) { inner += static_cast<int>(e - b); });
        EXPECT_EQ(inner, 3);
      },
      5);
  EXPECT_EQ(chunks.load(), 2);
}

TEST(ThreadPool, RethrowsTaskErrorsAndStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(9,
                                 [](int64_t begin, int64_t) {
                                   if (begin > 0) fail("boom");
                                 }),
               Error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

}  // namespace
}  // namespace deepinfer
