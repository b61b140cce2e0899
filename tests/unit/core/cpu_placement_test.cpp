// llama.cpp's --cpu-mask / --cpu-strict / --numa as planned CPU sets, and ThreadPool applying
// them: each worker's sched_getaffinity is what the plan says. Skips where this process may
// not use the CPUs the test pins to.
#include "core/cpu_placement.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace deepinfer {
namespace {

std::vector<int> this_thread_cpus() {
  return allowed_cpus();  // sched_getaffinity(0): the calling thread
}

TEST(CpuPlacement, ParsesLlamaCppHexMasks) {
  EXPECT_EQ(parse_cpu_mask("5", "--cpu-mask"), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_cpu_mask("0x10", "--cpu-mask"), (std::vector<int>{4}));
  EXPECT_EQ(parse_cpu_mask("F0", "--cpu-mask"), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(parse_cpu_mask("100", "--cpu-mask"), (std::vector<int>{8}));
  EXPECT_THROW(parse_cpu_mask("0x0", "--cpu-mask"), Error);
  try {
    parse_cpu_mask("12g", "--cpu-mask");
    FAIL() << "a bad digit must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-mask"), std::string::npos) << e.what();
  }
}

TEST(CpuPlacement, ParsesKernelCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
}

TEST(CpuPlacement, PlansMasksStrictAndNuma) {
  EXPECT_FALSE(plan_cpu_placement(4, NumaStrategy::none, {}, false).pinned());
  const CpuPlacement loose = plan_cpu_placement(3, NumaStrategy::none, {1, 3}, false);
  ASSERT_TRUE(loose.pinned());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(loose.of_thread(i), (std::vector<int>{1, 3}));
  const CpuPlacement strict = plan_cpu_placement(3, NumaStrategy::none, {1, 3}, true);
  EXPECT_EQ(strict.of_thread(0), std::vector<int>{1});
  EXPECT_EQ(strict.of_thread(1), std::vector<int>{3});
  EXPECT_EQ(strict.of_thread(2), std::vector<int>{1});  // round robin past the mask
  EXPECT_THROW(plan_cpu_placement(2, NumaStrategy::distribute, {0}, false), Error);
  EXPECT_THROW(parse_numa_strategy("spread", "--numa"), Error);
  EXPECT_EQ(parse_numa_strategy("isolate", "--numa"), NumaStrategy::isolate);
  const CpuPlacement numa = plan_cpu_placement(2, NumaStrategy::distribute, {}, false);
  if (numa_node_cpus().size() == 1) {
    EXPECT_FALSE(numa.pinned());
    EXPECT_NE(numa.summary.find("one NUMA node"), std::string::npos) << numa.summary;
  } else {
    EXPECT_EQ(numa.of_thread(0), numa_node_cpus()[0]);
    EXPECT_EQ(numa.of_thread(1), numa_node_cpus()[1]);
  }
}

// Each pool thread's affinity as it runs its chunk (chunk i runs on thread i).
std::vector<std::vector<int>> affinity_per_thread(int threads, CpuPlacement placement) {
  std::vector<std::vector<int>> seen(static_cast<size_t>(threads));
  // A thread of its own builds the pool: the pool pins its constructing thread, which must not
  // be the test runner's.
  std::thread owner([&] {
    ThreadPool pool(threads, std::move(placement));
    pool.parallel_for(threads, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)] = this_thread_cpus();
    });
  });
  owner.join();
  return seen;
}

TEST(CpuPlacement, ThreadPoolPinsEachWorker) {
  const std::vector<int> allowed = allowed_cpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs two usable CPUs";
  const std::vector<int> two = {allowed[0], allowed[1]};
  const auto strict = affinity_per_thread(2, plan_cpu_placement(2, NumaStrategy::none, two, true));
  EXPECT_EQ(strict[0], std::vector<int>{two[0]});
  EXPECT_EQ(strict[1], std::vector<int>{two[1]});
  const auto loose =
      affinity_per_thread(2, plan_cpu_placement(2, NumaStrategy::none, {two[1]}, false));
  EXPECT_EQ(loose[0], std::vector<int>{two[1]});
  EXPECT_EQ(loose[1], std::vector<int>{two[1]});
  const auto unpinned = affinity_per_thread(2, {});
  EXPECT_EQ(unpinned[1], allowed);
}

}  // namespace
}  // namespace deepinfer
