// MappedFile's --no-mmap and --mlock, and huge page advice, observed in /proc/self/smaps:
// the mapping's kind (file or anonymous), its Locked: bytes and THPeligible / AnonHugePages.
// Tests that need what the kernel may refuse (an mlock limit, THP "never") skip then.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/huge_page_arena.h"
#include "core/mapped_file.h"
#include "core/memory.h"
#include "core/tensor.h"
#include "kernels/packed_experts.h"
#include "kernels/packed_weights.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// The smaps entry of the mapping holding `address`: its header line and its "Key: N kB"
// fields (in kB; THPeligible as its 0/1 value).
struct SmapsEntry {
  std::string header;
  std::map<std::string, int64_t> fields;
  bool found = false;
};

SmapsEntry smaps_of(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream in("/proc/self/smaps");
  SmapsEntry entry;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    const bool header = dash != std::string::npos && space != std::string::npos && dash < space &&
                        line.find(':') > space;
    if (header) {
      if (inside) break;
      const uintptr_t begin = std::stoull(line.substr(0, dash), nullptr, 16);
      const uintptr_t end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = at >= begin && at < end;
      if (inside) {
        entry.header = line;
        entry.found = true;
      }
      continue;
    }
    if (!inside) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream value(line.substr(colon + 1));
    int64_t n = 0;
    if (value >> n) entry.fields[line.substr(0, colon)] = n;
  }
  return entry;
}

std::string write_file(const std::string& name, size_t bytes) {
  const fs::path path = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::ofstream out(path, std::ios::binary);
  for (size_t i = 0; i < bytes; ++i) out.put(static_cast<char>(i * 7 + 3));
  return path.string();
}

TEST(MemoryMappedFile, NoMmapReadsTheFileIntoAnonymousMemory) {
  const std::string path = write_file("di_nommap", 100000);
  const auto mapped = MappedFile::open(path);
  const auto read = MappedFile::open(path, {.mmap = false});
  EXPECT_TRUE(mapped->mapped());
  EXPECT_FALSE(read->mapped());
  ASSERT_EQ(read->size(), size_t{100000});
  EXPECT_EQ(std::memcmp(read->data(), mapped->data(), read->size()), 0);
  EXPECT_EQ(static_cast<unsigned char>(read->data()[99999]),
            static_cast<unsigned char>(99999 * 7 + 3));
  const SmapsEntry file = smaps_of(mapped->data());
  const SmapsEntry anon = smaps_of(read->data());
  ASSERT_TRUE(file.found && anon.found);
  EXPECT_NE(file.header.find(fs::path(path).filename().string()), std::string::npos) << file.header;
  EXPECT_EQ(anon.header.find(fs::path(path).filename().string()), std::string::npos) << anon.header;
  fs::remove(path);
}

// Packed weights drop the pages of their mapped source (MappedFile::release); a --no-mmap copy
// has no file behind it, so releasing it must keep its bytes.
TEST(MemoryMappedFile, ReleaseKeepsAnonymousBytes) {
  const std::string path = write_file("di_release", 3 * 4096 * 16);
  const auto read = MappedFile::open(path, {.mmap = false});
  const auto mapped = MappedFile::open(path);
  read->release(read->data(), read->size());
  mapped->release(mapped->data(), mapped->size());
  EXPECT_EQ(std::memcmp(read->data(), mapped->data(), read->size()), 0);
  EXPECT_EQ(static_cast<unsigned char>(read->data()[4096 * 5 + 1]),
            static_cast<unsigned char>((4096 * 5 + 1) * 7 + 3));
  fs::remove(path);
}

TEST(MemoryMappedFile, MlockLocksTheWeights) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer intercepts mlock as a no-op (it returns 0, locks nothing)";
#endif
  const std::string path = write_file("di_mlock", 256 * 1024);
  for (bool mmap : {true, false}) {
    const auto file = MappedFile::open(path, {.mmap = mmap, .mlock = true});
    if (!file->locked()) GTEST_SKIP() << "mlock refused here (RLIMIT_MEMLOCK, ulimit -l)";
    SmapsEntry entry = smaps_of(file->data());
    ASSERT_TRUE(entry.found);
    EXPECT_GE(entry.fields["Locked"] * 1024, 256 * 1024) << entry.header;
  }
  const auto unlocked = MappedFile::open(path);
  EXPECT_FALSE(unlocked->locked());
  EXPECT_EQ(smaps_of(unlocked->data()).fields["Locked"], 0);
  fs::remove(path);
}

TEST(MemoryHugePages, AnonymousBuffersAreAlignedAndAdvised) {
  const size_t bytes = 3 * kHugePageBytes;
  std::byte* advised = map_anonymous(bytes, true, "test");
  std::byte* plain = map_anonymous(bytes, false, "test");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(advised) % kHugePageBytes, 0u);
  std::memset(advised, 1, bytes);
  std::memset(plain, 1, bytes);
  EXPECT_EQ(static_cast<int>(advised[bytes - 1]), 1);
  const std::string mode = thp_mode();
  if (mode == "never") {
    release_anonymous(advised, bytes);
    release_anonymous(plain, bytes);
    GTEST_SKIP() << "transparent huge pages are off in this kernel (\"never\")";
  }
  SmapsEntry on = smaps_of(advised);
  SmapsEntry off = smaps_of(plain);
  if (on.fields.count("THPeligible")) {
    EXPECT_EQ(on.fields["THPeligible"], 1) << on.header;
    if (mode == "madvise") {
      EXPECT_EQ(off.fields["THPeligible"], 0) << off.header;
    }
  } else {
    EXPECT_GT(on.fields["AnonHugePages"], 0) << on.header;
  }
  release_anonymous(advised, bytes);
  release_anonymous(plain, bytes);
}

TEST(MemoryHugePages, BigTensorsAskForThemSmallOnesDoNot) {
  const Tensor big = Tensor::zeros({int64_t{1} << 20}, DType::f32, true);  // 4 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.raw()) % kHugePageBytes, 0u);
  const Tensor small = Tensor::zeros({16}, DType::f32, true);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.raw()) % Storage::kAlignment, 0u);
  EXPECT_EQ(static_cast<const float*>(big.raw())[12345], 0.0f);  // zero-filled
}

TEST(MemoryHugePages, PackedPanelsAskForThem) {
  const int64_t n = 1024, k = 1024;  // 4 MiB of f32 panels
  std::vector<float> w(static_cast<size_t>(n * k), 0.5f);
  const kernels::PackedWeights advised = kernels::pack_weights(w.data(), DType::f32, n, k, true);
  if (!advised.defined()) GTEST_SKIP() << "no packed kernel for f32 under this ISA";
  if (thp_mode() == "never") GTEST_SKIP() << "transparent huge pages are off (\"never\")";
  SmapsEntry entry = smaps_of(advised.panels());
  if (entry.fields.count("THPeligible")) {
    EXPECT_EQ(entry.fields["THPeligible"], 1) << entry.header;
  }
}

// An expert big enough for huge pages (gate + up 4.3 MB of f32) packs the same bytes into
// memory of its own mapping, advised for them.
TEST(MemoryHugePages, PackedExpertsAskForThemAndPackTheSameBytes) {
  const int64_t h = 512, i = 1040;
  std::vector<float> gate(static_cast<size_t>(i * h)), up(gate.size()), down(gate.size());
  for (size_t e = 0; e < gate.size(); ++e) {
    gate[e] = static_cast<float>(e % 97) * 0.01f;
    up[e] = static_cast<float>(e % 89) * -0.02f;
    down[e] = static_cast<float>(e % 83) * 0.03f;
  }
  const auto pack = [&](bool huge) {
    return kernels::pack_expert(gate.data(), up.data(), DType::f32, down.data(), DType::f32, h, i,
                                huge);
  };
  const kernels::PackedExpert advised = pack(true), plain = pack(false);
  if (!advised.defined()) GTEST_SKIP() << "no packed kernel for f32 under this ISA";
  const size_t gate_up_bytes = advised.bytes() - advised.down().bytes();
  ASSERT_EQ(advised.bytes(), plain.bytes());
  EXPECT_EQ(std::memcmp(advised.gate_up_panels(), plain.gate_up_panels(), gate_up_bytes), 0);
  EXPECT_EQ(std::memcmp(advised.down().panels(), plain.down().panels(), advised.down().bytes()), 0);
  if (thp_mode() == "never") GTEST_SKIP() << "transparent huge pages are off (\"never\")";
  SmapsEntry entry = smaps_of(advised.gate_up_panels());
  if (entry.fields.count("THPeligible")) {
    EXPECT_EQ(entry.fields["THPeligible"], 1) << entry.header;
  }
}

TEST(MemoryHugePages, SmallBuffersAreCarvedFromSharedRegionsAndBigOnesMappedAlone) {
  const auto address = [](const std::shared_ptr<std::byte>& p) {
    return reinterpret_cast<uintptr_t>(p.get());
  };
  const size_t quarter = kArenaRegionBytes / 4;
  // Quarters until four sit side by side: a whole region of this test's own, whatever earlier
  // allocations in this process left in the arena. The next buffer starts a fresh region.
  std::vector<std::shared_ptr<std::byte>> quarters;
  for (size_t side_by_side = 0; side_by_side < 4;) {
    ASSERT_LT(quarters.size(), 8u);
    quarters.push_back(allocate_huge_paged(quarter, "test"));
    quarters.back().get()[quarter - 1] = std::byte{7};
    const size_t n = quarters.size();
    const bool adjacent = n > 1 && address(quarters[n - 1]) == address(quarters[n - 2]) + quarter;
    side_by_side = adjacent ? side_by_side + 1 : 1;
  }
  const void* full = quarters[quarters.size() - 4].get();

  auto small = allocate_huge_paged(1000, "test");
  auto next = allocate_huge_paged(3 << 20, "test");
  EXPECT_EQ(address(small) % 64, 0u);
  EXPECT_EQ(address(next) % 64, 0u);
  EXPECT_EQ(address(next), address(small) + 1024);  // carved one after the other
  const SmapsEntry region = smaps_of(small.get());
  ASSERT_TRUE(region.found);
  EXPECT_EQ(smaps_of(next.get()).header, region.header);  // one mapping
  for (size_t i = 0; i < (3 << 20); i += 4096) ASSERT_EQ(next.get()[i], std::byte{0});
  if (thp_mode() != "never" && region.fields.count("THPeligible")) {
    EXPECT_EQ(region.fields.at("THPeligible"), 1) << region.header;
  }

  auto big = allocate_huge_paged(quarter + 1, "test");  // more than a quarter: alone
  EXPECT_EQ(address(big) % kHugePageBytes, 0u);

  // The full region stays usable while its buffers live, and is unmapped when they are
  // released (the arena has moved on from it).
  EXPECT_EQ(quarters.back().get()[quarter - 1], std::byte{7});
  quarters.clear();
  EXPECT_FALSE(smaps_of(full).found);
  EXPECT_EQ(next.get()[0], std::byte{0});
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// 48 MB is above glibc's largest default mmap threshold (32 MiB): without the policy each
// allocation is a fresh mapping whose every page (or huge page) faults again when written.
long faults_writing_a_fresh_block(size_t bytes) {
  auto* block = static_cast<volatile char*>(std::malloc(bytes));
  const long before = minor_faults();
  for (size_t i = 0; i < bytes; i += 4096) block[i] = 1;
  const long faults = minor_faults() - before;
  std::free(const_cast<char*>(block));
  return faults;
}

TEST(MemoryHeap, FreedActivationBlocksAreReusedWithoutFaults) {
  if (!keep_freed_heap_memory(kKeptHeapBlockBytes))
    GTEST_SKIP() << "the allocator refused the thresholds (a sanitizer's allocator, or a glibc "
                    "that caps M_MMAP_THRESHOLD at 32 MiB)";
  const size_t bytes = size_t{48} << 20;
  faults_writing_a_fresh_block(bytes);  // the heap grows once
  EXPECT_LT(faults_writing_a_fresh_block(bytes), 8) << "the freed block went back to the kernel";
}

}  // namespace
}  // namespace deepinfer
