#pragma once
// Peak arithmetic rates of this CPU for kernels_bench --gemm: each thread runs kChains
// independent accumulator chains of one instruction (more chains than latency x issue width
// of any current core: 4-5 cycles x 2 pipes), so the loop is bound by throughput alone.
//  - f32 FMA (vfmadd231ps zmm, or ymm for AVX2): 2 FLOP per lane;
//  - vdpbf16ps (AVX512_BF16): 32 bf16 pair products into 16 f32 lanes = 64 FLOP;
//  - vpdpbusd (AVX512_VNNI): 64 u8 x s8 products into 16 i32 lanes = 128 integer ops;
//  - AMX TDPBSSD / TDPBF16PS on four independent C tiles (below).
// The functions carry their ISA as target attributes: call one only when the CPU has it.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "core/thread_pool.h"

namespace deepinfer::bench_peak {

constexpr int kChains = 16;
constexpr int kChainsYmm = 12;  // AVX2 has 16 ymm registers: leave room for the operands

__attribute__((target("avx512f"))) inline float fma_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) inline float fma_avx2(int64_t iters) {
  __m256 acc[kChainsYmm];
  for (int i = 0; i < kChainsYmm; ++i) acc[i] = _mm256_set1_ps(1e-3f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChainsYmm; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < kChainsYmm; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  return lanes[0] + lanes[7];
}

__attribute__((target("avx512f,avx512bf16"))) inline float dpbf16_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  // bf16 0x3a83 ~ 1e-3: the sums stay small and normal.
  const __m512bh a = __builtin_bit_cast(__m512bh, _mm512_set1_epi16(0x3a83));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512vnni"))) inline float vnni_avx512(int64_t iters) {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
  return static_cast<float>(_mm512_reduce_add_epi32(s));
}

// AMX tiles (the kernels' "full" configuration, all eight tiles 16 x 64 bytes, loaded by the
// caller on each thread): four independent C tiles from tiles 4 .. 7, one TDPBSSD (16 x 16 x 64
// int8 products = 32768 integer ops) or TDPBF16PS (16 x 16 x 32 bf16 products = 16384 FLOP)
// each.
__attribute__((target("amx-tile,amx-int8"))) inline float amx_int8(int64_t iters) {
  alignas(64) static const int8_t ones[16 * 64] = {};
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  alignas(64) int32_t c[16 * 16];
  _tile_stored(0, c, 64);
  return static_cast<float>(c[0]);
}

__attribute__((target("amx-tile,amx-bf16"))) inline float amx_bf16(int64_t iters) {
  alignas(64) static const uint16_t small[16 * 32] = {};
  _tile_loadd(4, small, 64);
  _tile_loadd(5, small, 64);
  _tile_loadd(6, small, 64);
  _tile_loadd(7, small, 64);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[16 * 16];
  _tile_stored(0, c, 64);
  return c[0];
}

// Operations per second (FLOP or integer ops) of `loop` (ops_per_iter per iteration) run by
// every thread of `pool` at once: the best of 3 runs of about 0.1 s.
template <typename Loop>
double rate(const Loop& loop, double ops_per_iter, ThreadPool& pool, int64_t iters = 20'000'000) {
  volatile float sink = 0.0f;
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) sink = sink + loop(iters);
    });
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return ops_per_iter * static_cast<double>(iters) * pool.size() / best;
}

}  // namespace deepinfer::bench_peak
