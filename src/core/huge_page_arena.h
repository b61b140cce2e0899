#pragma once
// Long-lived buffers on transparent huge pages with no huge page left half on 4 KiB pages:
// the repacked and packed weights (kernels/gemm_packed.cpp). Mapped alone, a 1 MB projection
// (Qwen2.5-0.5B's q / k / v, o) sat wholly on 4 KiB pages and a 9 MB one its last 1.3 MB: a
// decode streams every weight once per token, so each of those 4 KiB pages cost a TLB miss (a
// two-level walk in a VM) at the start of a short call. Carved one after another from shared
// regions instead, every weight byte is on huge pages.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace deepinfer {

// `bytes` of zero-filled memory, 64-byte aligned, advised for huge pages: carved from a shared
// region of kArenaRegionBytes (2 MiB aligned) when at most a quarter of one, else mapped alone
// and rounded up to whole huge pages. Releasing a carved buffer gives its whole pages back to
// the kernel; a region is unmapped when its last buffer is released and the arena has moved
// on to a newer region. Thread-safe. Throws Error naming `what` when the kernel refuses.
std::shared_ptr<std::byte> allocate_huge_paged(size_t bytes, const std::string& what);

inline constexpr size_t kArenaRegionBytes = size_t{64} << 20;

// The buffers allocate_huge_paged() handed out that are still held, each as [data, data +
// bytes), kept alive by `owner` while the run is held: the weights a decode streams, whose own
// read bandwidth the benchmarks measure (kernels::read_bandwidth; `generate
// --measure-bandwidth`). Pages differ: on a shared VM a fresh buffer read 35 or 60 GB/s.
struct MemoryRun {
  const std::byte* data;
  size_t bytes;
  std::shared_ptr<const void> owner;
};
std::vector<MemoryRun> huge_paged_in_use();

}  // namespace deepinfer
