// ScratchFloats: activation buffers reused from the calling thread's cache of freed blocks.
#include "core/scratch.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <thread>

namespace deepinfer {
namespace {

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Faults taken writing every page of a fresh `floats`-long buffer.
long faults_writing(size_t floats) {
  auto buffer = ScratchFloats::uninitialized(floats);
  const long before = minor_faults();
  for (size_t i = 0; i < floats; i += 1024) buffer[i] = 1.0f;
  return minor_faults() - before;
}

TEST(ScratchFloats, AStepReusesTheLastStepsBlocksWithoutFaults) {
  // Run on a thread of its own: its cache starts empty and is dropped with it.
  std::thread([] {
    const size_t floats = size_t{12} << 20;  // 48 MB: above glibc's largest mmap threshold
    EXPECT_GT(faults_writing(floats), 0);    // the first block is mapped and faulted in
    EXPECT_EQ(ScratchFloats::cached_bytes(), size_t{48} << 20);
    EXPECT_EQ(faults_writing(floats), 0) << "the freed block was not reused";
    EXPECT_EQ(faults_writing(floats - 1000), 0) << "a smaller request takes the cached block";
    {
      ScratchFloats small(size_t{1} << 20);  // 4 MB: does not pin the 48 MB block
      EXPECT_EQ(ScratchFloats::cached_bytes(), size_t{48} << 20);
    }
    EXPECT_EQ(ScratchFloats::cached_bytes(), size_t{52} << 20);
  }).join();
}

TEST(ScratchFloats, ZeroedUnlessAskedOtherwiseAlsoFromAReusedBlock) {
  std::thread([] {
    const size_t floats = size_t{1} << 20;
    {
      auto dirty = ScratchFloats::uninitialized(floats);
      std::fill(dirty.begin(), dirty.end(), 7.0f);
    }
    ScratchFloats reused(floats);  // the same block, handed out again
    EXPECT_EQ(reused.size(), floats);
    EXPECT_TRUE(std::all_of(reused.begin(), reused.end(), [](float x) { return x == 0.0f; }));
    ScratchFloats small(100);  // below the cached size: a heap block, zeroed too
    EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](float x) { return x == 0.0f; }));
    EXPECT_TRUE(ScratchFloats(0).empty());
  }).join();
}

TEST(ScratchFloats, MovesHandOverTheBlockAndTheCacheIsBounded) {
  std::thread([] {
    const size_t floats = size_t{1} << 20;
    ScratchFloats a(floats);
    a[5] = 3.0f;
    const float* where = a.data();
    ScratchFloats b = std::move(a);
    EXPECT_EQ(b.data(), where);
    EXPECT_EQ(b[5], 3.0f);
    EXPECT_TRUE(a.empty());
    b = ScratchFloats(10);  // the moved block goes back to the cache
    EXPECT_EQ(ScratchFloats::cached_bytes(), size_t{4} << 20);
    {
      // More live blocks than the cache keeps once they are all freed.
      std::vector<ScratchFloats> many;
      const size_t big = ScratchFloats::kMaxCachedBytes / sizeof(float) / 4;
      for (int i = 0; i < 6; ++i) many.push_back(ScratchFloats::uninitialized(big));
    }
    EXPECT_LE(ScratchFloats::cached_bytes(), ScratchFloats::kMaxCachedBytes);
  }).join();
}

}  // namespace
}  // namespace deepinfer
