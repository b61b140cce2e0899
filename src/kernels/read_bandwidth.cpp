#include "kernels/read_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/isa.h"

namespace deepinfer::kernels {
namespace {

// [data, data + bytes) read once: four independent chains of Bytes-wide loads folded by xor
// (the tail of fewer than 4 vectors is left: a few bytes of megabytes). Always inlined, so that
// each caller's target decides the instructions.
template <int Bytes>
struct VectorOf;  // GCC vector types: a dependent vector_size is ignored in a template
template <>
struct VectorOf<16> {
  typedef long long type __attribute__((vector_size(16)));
};
template <>
struct VectorOf<32> {
  typedef long long type __attribute__((vector_size(32)));
};
template <>
struct VectorOf<64> {
  typedef long long type __attribute__((vector_size(64)));
};

template <int Bytes>
__attribute__((always_inline)) inline uint64_t read_vectors(const std::byte* data, size_t bytes) {
  using Vector = typename VectorOf<Bytes>::type;
  Vector chains[4] = {};
  for (size_t i = 0; i + 4 * Bytes <= bytes; i += 4 * Bytes) {
    for (int c = 0; c < 4; ++c) {
      Vector v;
      std::memcpy(&v, data + i + c * Bytes, Bytes);
      chains[c] ^= v;
    }
  }
  const Vector all = chains[0] ^ chains[1] ^ chains[2] ^ chains[3];
  uint64_t folded = 0;
  for (int lane = 0; lane < Bytes / 8; ++lane) folded ^= static_cast<uint64_t>(all[lane]);
  return folded;
}

__attribute__((target("avx512f"))) uint64_t read_avx512(const std::byte* data, size_t bytes) {
  return read_vectors<64>(data, bytes);
}

__attribute__((target("avx2"))) uint64_t read_avx2(const std::byte* data, size_t bytes) {
  return read_vectors<32>(data, bytes);
}

uint64_t read_once(const std::byte* data, size_t bytes) {
  switch (active_isa()) {
    case Isa::avx512:
      return read_avx512(data, bytes);
    case Isa::avx2:
      return read_avx2(data, bytes);
    case Isa::scalar:
      break;
  }
  return read_vectors<16>(data, bytes);
}

}  // namespace

double read_bandwidth(std::span<const MemoryRun> runs, ThreadPool& pool, int passes) {
  size_t total = 0;
  for (const MemoryRun& run : runs) total += run.bytes;
  if (total == 0) return 0.0;
  const int64_t threads = pool.size();
  std::atomic<uint64_t> sink{0};
  // Thread t reads bytes [total * t / threads, total * (t + 1) / threads) of the runs laid end
  // to end.
  const auto read_share = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      size_t begin = total * static_cast<size_t>(t) / static_cast<size_t>(threads);
      const size_t end = total * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
      size_t at = 0;
      uint64_t folded = 0;
      for (const MemoryRun& run : runs) {
        const size_t lo = std::max(begin, at), hi = std::min(end, at + run.bytes);
        if (lo < hi) folded ^= read_once(run.data + (lo - at), hi - lo);
        at += run.bytes;
      }
      sink.fetch_xor(folded, std::memory_order_relaxed);
    }
  };
  double best = 0.0;
  for (int p = 0; p < std::max(passes, 1); ++p) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(threads, read_share);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(total) / seconds * 1e-9);
  }
  volatile uint64_t keep = sink.load();  // the reads cannot be elided
  (void)keep;
  return best;
}

}  // namespace deepinfer::kernels
