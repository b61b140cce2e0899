#include "kernels/read_bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/isa.h"

namespace deepinfer::kernels {
namespace {

// [data, data + bytes) read once: four independent chains of the widest loads the CPU has
// (the tail of fewer than 4 vectors is left: a few bytes of megabytes).
__attribute__((target("avx512f"))) uint64_t read_avx512(const std::byte* data, size_t bytes) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    a = _mm512_xor_si512(a, _mm512_loadu_si512(data + i));
    b = _mm512_xor_si512(b, _mm512_loadu_si512(data + i + 64));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(data + i + 128));
    d = _mm512_xor_si512(d, _mm512_loadu_si512(data + i + 192));
  }
  alignas(64) uint64_t lanes[8];  // not _mm512_reduce_*: GCC 12 flags its casts uninitialized
  _mm512_store_si512(lanes, _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
  uint64_t folded = 0;
  for (uint64_t lane : lanes) folded ^= lane;
  return folded;
}

__attribute__((target("avx2"))) uint64_t read_avx2(const std::byte* data, size_t bytes) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    const auto* p = reinterpret_cast<const __m256i*>(data + i);
    a = _mm256_xor_si256(a, _mm256_loadu_si256(p));
    b = _mm256_xor_si256(b, _mm256_loadu_si256(p + 1));
    c = _mm256_xor_si256(c, _mm256_loadu_si256(p + 2));
    d = _mm256_xor_si256(d, _mm256_loadu_si256(p + 3));
  }
  const __m256i v = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return static_cast<uint64_t>(_mm256_extract_epi64(v, 0) ^ _mm256_extract_epi64(v, 3));
}

uint64_t read_sse2(const std::byte* data, size_t bytes) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (size_t i = 0; i + 64 <= bytes; i += 64) {
    const auto* p = reinterpret_cast<const __m128i*>(data + i);
    a = _mm_xor_si128(a, _mm_loadu_si128(p));
    b = _mm_xor_si128(b, _mm_loadu_si128(p + 1));
    c = _mm_xor_si128(c, _mm_loadu_si128(p + 2));
    d = _mm_xor_si128(d, _mm_loadu_si128(p + 3));
  }
  return static_cast<uint64_t>(
      _mm_cvtsi128_si64(_mm_xor_si128(_mm_xor_si128(a, b), _mm_xor_si128(c, d))));
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
  return read_sse2(data, bytes);
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
