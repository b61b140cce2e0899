#pragma once
// How large host buffers are backed: transparent huge pages (madvise), mlock, and anonymous
// memory instead of a file mapping (--no-mmap). One small set of options, parsed once from
// the config (config/apply.cpp) and handed down: to the checkpoint files (io/), the KV pool
// (cache/) and Storage::allocate for big owned tensors.
#include <cstddef>
#include <string>

namespace deepinfer {

struct MemoryOptions {
  // false (--no-mmap): weight files are read into anonymous memory instead of being mapped.
  bool mmap = true;
  // --mlock: lock weight memory in RAM (mlock), so it is never paged out. A failure (usually
  // RLIMIT_MEMLOCK, `ulimit -l`) is a warning and the run continues unlocked, as in llama.cpp.
  bool mlock = false;
  // madvise(MADV_HUGEPAGE) on big anonymous buffers (KV pool, --no-mmap weights, big owned
  // tensors) and on weight file mappings; false: plain 4 KiB pages (A/B runs).
  bool huge_pages = true;
};

// The kernel's transparent huge page mode (/sys/kernel/mm/transparent_hugepage/enabled, or
// shmem_enabled for tmpfs files): "always", "madvise", "never" (also when the file is absent),
// or for shmem "within_size", "advise", "deny", "force".
std::string thp_mode();
std::string thp_shmem_mode();

// Buffers at least this big are mapped on their own and advised; smaller ones would not fill
// one huge page anyway.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// madvise(MADV_HUGEPAGE) on the whole 2 MiB pages inside [data, data + bytes); true when the
// kernel accepted it (false under THP "never", or for a file system without large folios).
bool advise_huge_pages(const void* data, size_t bytes);

// mlock(data, bytes); on failure logs one warning naming `what`, the size, the reason and
// RLIMIT_MEMLOCK, and returns false (the memory stays usable, only unlocked).
bool lock_memory(const void* data, size_t bytes, const std::string& what);

// Zero-filled anonymous memory of `bytes` (rounded up to pages), 2 MiB aligned when at least
// that big so that huge pages can back it; advised for huge pages when `huge_pages`. Throws
// Error naming `what` when the kernel refuses. Free with release_anonymous(data, bytes).
std::byte* map_anonymous(size_t bytes, bool huge_pages, const std::string& what);
void release_anonymous(std::byte* data, size_t bytes);

// Keeps freed heap memory below `bytes` per block in the process instead of returning it to
// the kernel: glibc serves blocks above its mmap threshold (at most 32 MiB by default) from
// fresh mappings and trims the heap top, so every forward pass's activations (a 1024-token
// step's MLP buffers are 20-40 MB) were page-faulted and zeroed again, layer after layer (14 %
// of a prefill's samples). Raises the mmap and trim thresholds to `bytes`; true when glibc took
// both (a glibc before 2.35 caps the mmap threshold at 32 MiB: set to that, and false).
// Process-wide, so only the commands that run the model without an HTTP server call it
// (generate, bench --mode offline, validate, run --mode local): in `serve` the request threads'
// arenas would keep every freed request body (test_huge_prompts_are_refused_in_bounded_memory:
// peak RSS growth 121 -> 311 MB). Peak activation memory stays resident, as llama.cpp's compute
// buffer does. The forward pass's big buffers do not depend on it: they are ScratchFloats
// (core/scratch.h), reused in every command, serve included.
bool keep_freed_heap_memory(size_t bytes);
inline constexpr size_t kKeptHeapBlockBytes = size_t{1} << 30;

}  // namespace deepinfer
