// Throughput of kernels::linear (built with -DDEEPINFER_BUILD_BENCH=ON: build/kernels_bench).
//
//   g++ -std=c++20 -O2 -Isrc bench/kernels_bench.cpp build/libdeepinfer.a -lpthread
//       $(pkg-config --libs libpcre2-8 libutf8proc) -o kernels_bench
//   ./kernels_bench [--isa scalar|avx2|avx512|amx] [--threads 1,2] [--precision f32|bf16] [--json]
//                   [--weights bf16,f32,q8_0,q4_1,q5_0,q5_1,q4_k,q5_k,q6_k] [--decode]
//                   [--shapes MxKxN,...]
//   ./kernels_bench --gemm [--threads 1,2] [--m 1,8,32,128,512] [--json]
//
// --weights picks the weight dtypes (default bf16,f32); --decode keeps the m = 1 shapes only;
// --shapes replaces the default shapes (e.g. 1x2048x1408,512x1408x2048).
// --gemm: the peak probe (f32 FMA, vdpbf16ps, vpdpbusd; kernels_bench_peak.h), then
// m = 1, 8, 32, 128, 512 on the Qwen2.5-0.5B projections for f32 weights, bf16 weights (exact)
// and bf16 weights with bf16 activations, each through the stored matrix ("raw") and packed
// weights ("packed") alternately, with GFLOP/s as a % of the peak that bounds it; then, for
// m >= 8, the same f32 and bf16-activation problems through OpenBLAS and oneDNN where
// tools/setup_gemm_peers.sh installed them (bench/gemm_peers.h).
// For each (m, k, n, weight dtype, threads) it reports GFLOP/s (2·m·n·k per call) and the
// weight bytes streamed per second. "cold" cycles through enough weight copies to exceed the
// last-level cache (DRAM bandwidth); "hot" reuses one copy (cache-resident when it fits).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "gemm_peers.h"
#include "kernels/backend.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels_bench_peak.h"

using namespace deepinfer;

namespace {

struct Result {
  double seconds_per_call;  // wall clock
  double cpu_per_call;      // process CPU time / threads: robust on a busy machine
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Block weights get pseudo-random bytes of 0x30..0x3f: every f16 scale is then a normal value
// in [0.13, 1.9], int8 scales 48..63, and quants vary (no NaN or subnormal slow paths).
void fill_blocks(std::vector<unsigned char>& w) {
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<unsigned char>(0x30 | ((i * 2654435761u) >> 13 & 0x0f));
}

// Median wall and CPU time per call of call(i) (i cycles over the copies), after a warm-up.
template <typename Call>
Result time_calls(const Call& call, int copies, int reps, double min_seconds, ThreadPool& pool) {
  for (int i = 0; i < copies; ++i) call(i);  // warm-up (page faults, thread wake-up)
  std::vector<double> samples, cpu_samples;
  for (int rep = 0; rep < reps; ++rep) {
    int calls = 0;
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    double elapsed = 0.0;
    while (elapsed < min_seconds || calls < copies) {
      call(calls++);
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    samples.push_back(elapsed / calls);
    cpu_samples.push_back((process_cpu_seconds() - cpu_start) / pool.size() / calls);
  }
  std::sort(samples.begin(), samples.end());
  std::sort(cpu_samples.begin(), cpu_samples.end());
  return {samples[samples.size() / 2], cpu_samples[cpu_samples.size() / 2]};
}

// The f32 values every benchmark's weights are made from (deterministic, in [-0.5, 0.5)).
std::vector<float> weight_values(int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  return v;
}

Result time_linear(int64_t m, int64_t k, int64_t n, DType dtype, int copies, ThreadPool& pool) {
  const size_t w_bytes = static_cast<size_t>(n) * dtype_bytes(dtype, k);
  std::vector<std::vector<unsigned char>> weights(static_cast<size_t>(copies));
  const std::vector<float> src = weight_values(n * k);
  for (auto& w : weights) {
    w.resize(w_bytes);
    if (is_block_dtype(dtype)) {
      fill_blocks(w);
    } else {
      convert_from_f32(src.data(), w.data(), dtype, src.size());
    }
  }
  // Block weights run as a model holds them: repacked where pack_weights() repacks them (q4_0
  // / q5_0 / q4_k under AVX2; DEEPINFER_PACK_WEIGHTS=0 for the stored layout).
  std::vector<kernels::PackedWeights> repacked;
  if (is_block_dtype(dtype) && kernels::repacks_blocks(dtype))
    for (const auto& w : weights) repacked.push_back(kernels::pack_weights(w.data(), dtype, n, k));
  std::vector<float> x(static_cast<size_t>(m * k), 0.25f), y(static_cast<size_t>(m * n));
  auto call = [&](int i) {
    const size_t c = static_cast<size_t>(i % copies);
    if (!repacked.empty()) {
      kernels::linear(x.data(), m, repacked[c], nullptr, y.data(), pool);
    } else {
      kernels::linear(x.data(), m, k, weights[c].data(), dtype, n, nullptr, y.data(), pool);
    }
  };
  return time_calls(call, copies, 7, 0.05, pool);
}

// Read bandwidth of `bytes` streamed by `pool` (integer sums: no FP, vectorised with the
// baseline ISA); the ceiling for memory-bound decode.
double read_gbps(size_t bytes, ThreadPool& pool) {
  std::vector<uint64_t> data(bytes / sizeof(uint64_t), 1);
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()) * 8, 0);
  auto pass = [&] {
    pool.parallel_for(static_cast<int64_t>(data.size()), [&](int64_t begin, int64_t end) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = begin;
      for (; i + 4 <= end; i += 4) {
        s0 += data[static_cast<size_t>(i)];
        s1 += data[static_cast<size_t>(i + 1)];
        s2 += data[static_cast<size_t>(i + 2)];
        s3 += data[static_cast<size_t>(i + 3)];
      }
      sums[static_cast<size_t>(begin * pool.size() / static_cast<int64_t>(data.size())) * 8] +=
          s0 + s1 + s2 + s3;
    });
  };
  pass();
  std::vector<double> samples;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    samples.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return static_cast<double>(bytes) / samples[0] / 1e9;
}

bool is_k(DType d) {
  return d == DType::q4_k || d == DType::q5_k || d == DType::q6_k;
}

// The kernels that run: the active ISA, or amx for AVX-512 with AMX tiles.
std::string_view kernel_set_name() {
  return kernels::amx_active() ? "amx" : kernels::isa_name(kernels::active_isa());
}

// parse_dtype() knows the element types; the block types by their dtype_name().
DType dtype_named(const std::string& name) {
  for (DType d : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q4_k,
                  DType::q5_k, DType::q6_k})
    if (name == dtype_name(d)) return d;
  return parse_dtype(name);
}

// Peak rates at one thread count, GFLOP/s (vnni: G integer ops/s); 0 where the CPU lacks it.
struct Peaks {
  double f32_fma = 0.0;  // of the active ISA's FMA: zmm for AVX-512, ymm for AVX2
  double dpbf16 = 0.0;
  double vnni = 0.0;
  double amx_int8 = 0.0;  // under --isa amx (or auto on an AMX CPU)
  double amx_bf16 = 0.0;
};

// The AMX probes run in the kernels' own "full" tile configuration, loaded through the kernels'
// per-thread record, so that no kernel afterwards finds shapes it did not load.
float amx_int8_probe(int64_t iters) {
  kernels::detail::avx512::configure_tiles(kernels::detail::avx512::AmxTiles::full);
  return bench_peak::amx_int8(iters);
}
float amx_bf16_probe(int64_t iters) {
  kernels::detail::avx512::configure_tiles(kernels::detail::avx512::AmxTiles::full);
  return bench_peak::amx_bf16(iters);
}

Peaks measure_peaks(ThreadPool& pool) {
  Peaks p;
  const kernels::Isa isa = kernels::active_isa();
  if (isa == kernels::Isa::avx512) {
    p.f32_fma = bench_peak::rate(bench_peak::fma_avx512, bench_peak::kChains * 32.0, pool) / 1e9;
    if (kernels::cpu_has_avx512_bf16())
      p.dpbf16 =
          bench_peak::rate(bench_peak::dpbf16_avx512, bench_peak::kChains * 64.0, pool) / 1e9;
    if (kernels::cpu_has_avx512_vnni())
      p.vnni = bench_peak::rate(bench_peak::vnni_avx512, bench_peak::kChains * 128.0, pool) / 1e9;
    if (kernels::amx_active()) {
      p.amx_int8 = bench_peak::rate(amx_int8_probe, 4 * 32768.0, pool, 1'000'000) / 1e9;
      p.amx_bf16 = bench_peak::rate(amx_bf16_probe, 4 * 16384.0, pool, 1'000'000) / 1e9;
    }
  } else if (isa == kernels::Isa::avx2) {
    p.f32_fma = bench_peak::rate(bench_peak::fma_avx2, bench_peak::kChainsYmm * 16.0, pool) / 1e9;
  }
  return p;
}

// --gemm: peaks, then raw vs packed weights alternately on the Qwen2.5-0.5B projections.
int run_gemm(const std::vector<int>& thread_counts, const std::vector<int64_t>& ms, bool json) {
  const auto isa = kernel_set_name();
  std::vector<Peaks> peaks;
  for (int threads : thread_counts) {
    ThreadPool pool(threads);
    peaks.push_back(measure_peaks(pool));
    const Peaks& p = peaks.back();
    if (json) {
      std::printf(
          "{\"op\":\"peak\",\"isa\":\"%.*s\",\"threads\":%d,\"f32_fma_gflops\":%.1f,"
          "\"dpbf16_gflops\":%.1f,\"vnni_gops\":%.1f,\"amx_int8_gops\":%.1f,"
          "\"amx_bf16_gflops\":%.1f}\n",
          static_cast<int>(isa.size()), isa.data(), threads, p.f32_fma, p.dpbf16, p.vnni,
          p.amx_int8, p.amx_bf16);
    } else {
      std::printf(
          "peak (%.*s, %d threads): f32 FMA %.1f GFLOP/s, vdpbf16ps %.1f GFLOP/s, "
          "vpdpbusd %.1f GOP/s, AMX-INT8 %.1f GOP/s, AMX-BF16 %.1f GFLOP/s\n",
          static_cast<int>(isa.size()), isa.data(), threads, p.f32_fma, p.dpbf16, p.vnni,
          p.amx_int8, p.amx_bf16);
    }
  }
  if (kernels::active_isa() == kernels::Isa::avx2) bench::limit_peers_to_avx2();
  if (json) {
    std::printf("{\"op\":\"peers\",\"libraries\":\"%s\"}\n", bench::peer_versions().c_str());
  } else {
    std::printf("library peers: %s\n", bench::peer_versions().c_str());
  }
  if (!json)
    std::printf("%5s %5s %6s %5s %8s %3s %5s %10s %9s %7s %9s\n", "m", "k", "n", "w", "path", "thr",
                "cache", "us/call", "GFLOP/s", "%peak", "wGB/s");
  struct Variant {
    const char* name;  // f32 and bf16: exact f32 math; bf16a: bf16 activations
    DType dtype;
    kernels::MatmulPrecision precision;
  };
  const Variant variants[] = {{"f32", DType::f32, kernels::MatmulPrecision::f32},
                              {"bf16", DType::bf16, kernels::MatmulPrecision::f32},
                              {"bf16a", DType::bf16, kernels::MatmulPrecision::bf16},
                              {"q8_0", DType::q8_0, kernels::MatmulPrecision::f32},
                              {"q4_0", DType::q4_0, kernels::MatmulPrecision::f32}};
  // The peak that bounds a variant: the integer dot units for block weights (AMX-INT8 or
  // vpdpbusd), bf16 pairs for bf16 activations (AMX-BF16 or vdpbf16ps), else f32 FMA.
  const auto bound = [](const Variant& v, const Peaks& p) {
    if (is_block_dtype(v.dtype)) return p.amx_int8 > 0.0 ? p.amx_int8 : p.vnni;
    if (v.precision == kernels::MatmulPrecision::bf16) {
      if (p.amx_bf16 > 0.0) return p.amx_bf16;
      if (p.dpbf16 > 0.0) return p.dpbf16;
    }
    return p.f32_fma;
  };
  struct Shape {
    int64_t k, n;
    std::vector<int64_t> ms;
  };
  // q_proj / o_proj, gate or up, down; the tied lm_head only where decode streams it.
  std::vector<int64_t> lm_head_ms;
  for (int64_t m : ms)
    if (m <= 8) lm_head_ms.push_back(m);
  const Shape shapes[] = {
      {896, 896, ms}, {896, 4864, ms}, {4864, 896, ms}, {896, 151936, lm_head_ms}};
  // One row: ours (path raw / packed) or a library's (path openblas / onednn).
  const auto report = [&](int64_t m, const Shape& s, const char* w, const char* path, int threads,
                          const char* cache, const Result& r, double gflops, double pct,
                          double peak, double gbps) {
    if (json) {
      std::printf(
          "{\"op\":\"gemm\",\"isa\":\"%.*s\",\"m\":%lld,\"k\":%lld,\"n\":%lld,"
          "\"w\":\"%s\",\"path\":\"%s\",\"threads\":%d,\"cache\":\"%s\","
          "\"us_per_call\":%.2f,\"gflops\":%.2f,\"pct_of_peak\":%.1f,"
          "\"peak_gflops\":%.1f,\"weight_gbps\":%.2f}\n",
          static_cast<int>(isa.size()), isa.data(), static_cast<long long>(m),
          static_cast<long long>(s.k), static_cast<long long>(s.n), w, path, threads, cache,
          r.seconds_per_call * 1e6, gflops, pct, peak, gbps);
    } else {
      std::printf("%5lld %5lld %6lld %5s %8s %3d %5s %10.1f %9.1f %6.1f%% %9.1f\n",
                  static_cast<long long>(m), static_cast<long long>(s.k),
                  static_cast<long long>(s.n), w, path, threads, cache, r.seconds_per_call * 1e6,
                  gflops, pct, gbps);
    }
    std::fflush(stdout);
  };
  const kernels::MatmulPrecision saved = kernels::matmul_precision();
  for (const Shape& s : shapes) {
    for (int64_t m : s.ms) {
      for (const Variant& v : variants) {
        kernels::set_matmul_precision(v.precision);
        const size_t w_bytes = static_cast<size_t>(s.n) * dtype_bytes(v.dtype, s.k);
        // m = 1: weights from DRAM (96 MiB of copies defeat a 32 MiB L3), as in decode.
        const int copies =
            m == 1 ? static_cast<int>(std::max<size_t>(1, (96u << 20) / w_bytes)) : 1;
        const std::vector<float> src = weight_values(s.n * s.k);
        std::vector<std::vector<unsigned char>> weights(static_cast<size_t>(copies));
        std::vector<kernels::PackedWeights> packed;
        for (auto& w : weights) {
          w.resize(w_bytes);
          if (is_block_dtype(v.dtype)) {
            fill_blocks(w);
          } else {
            convert_from_f32(src.data(), w.data(), v.dtype, src.size());
          }
          packed.push_back(kernels::pack_weights(w.data(), v.dtype, s.n, s.k));
        }
        std::vector<float> x(static_cast<size_t>(m * s.k), 0.25f), y(static_cast<size_t>(m * s.n));
        for (size_t t = 0; t < thread_counts.size(); ++t) {
          ThreadPool pool(thread_counts[t]);
          const double peak = bound(v, peaks[t]);
          for (const bool use_packed : {false, true}) {
            if (use_packed && !packed[0].defined()) continue;
            const auto call = [&](int i) {
              const size_t c = static_cast<size_t>(i % copies);
              if (use_packed) {
                kernels::linear(x.data(), m, packed[c], nullptr, y.data(), pool);
              } else {
                kernels::linear(x.data(), m, s.k, weights[c].data(), v.dtype, s.n, nullptr,
                                y.data(), pool);
              }
            };
            const Result r = time_calls(call, copies, 3, 0.02, pool);
            const double gflops = 2.0 * m * s.n * s.k / r.seconds_per_call / 1e9;
            const double gbps = static_cast<double>(w_bytes) / r.seconds_per_call / 1e9;
            report(m, s, v.name, use_packed ? "packed" : "raw", thread_counts[t],
                   m == 1 ? "cold" : "hot", r, gflops, peak > 0.0 ? 100.0 * gflops / peak : 0.0,
                   peak, gbps);
          }
        }
      }
    }
  }
  // The libraries on the same problems (hot weights: m >= 8; no exact-bf16 peer), after all of
  // ours and with no pool of ours alive: their threads (OpenMP, OpenBLAS's) and our workers
  // each spin a while after a call, and interleaved they slowed each other by up to 30x.
  for (const Shape& s : shapes) {
    for (int64_t m : s.ms) {
      if (m == 1) continue;
      for (const Variant& v : variants) {
        if (v.dtype == DType::bf16 && v.precision == kernels::MatmulPrecision::f32) continue;
        if (is_block_dtype(v.dtype)) continue;  // no block-weight peer library
        const bool bf16a = v.precision == kernels::MatmulPrecision::bf16;
        const std::vector<float> src = weight_values(s.n * s.k);
        std::vector<float> x(static_cast<size_t>(m * s.k), 0.25f), y(static_cast<size_t>(m * s.n));
        for (size_t t = 0; t < thread_counts.size(); ++t) {
          const double peak = bound(v, peaks[t]);
          ThreadPool caller(1);  // time_calls' CPU-time divisor only: no worker threads
          for (const bench::PeerGemm& peer : bench::make_peer_gemms(
                   x.data(), src.data(), y.data(), m, s.k, s.n,
                   bf16a ? bench::PeerPrecision::bf16a : bench::PeerPrecision::f32,
                   thread_counts[t])) {
            const Result r = time_calls([&](int) { peer.run(); }, 1, 3, 0.02, caller);
            const double gflops = 2.0 * m * s.n * s.k / r.seconds_per_call / 1e9;
            report(m, s, v.name, peer.name.c_str(), thread_counts[t], "hot", r, gflops,
                   peak > 0.0 ? 100.0 * gflops / peak : 0.0, peak, 0.0);
          }
        }
      }
    }
  }
  kernels::set_matmul_precision(saved);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  std::vector<DType> weight_dtypes = {DType::bf16, DType::f32};
  bool json = false;
  bool decode_only = false;
  bool gemm = false;
  std::vector<int64_t> gemm_ms = {1, 8, 32, 128, 512};
  struct Shape {
    int64_t m, k, n;
  };
  std::vector<Shape> shapes = {
      {1, 896, 4864}, {1, 4864, 896}, {4, 896, 4864}, {8, 896, 4864}, {128, 896, 4864}};
  const auto split = [](const std::string& list) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      out.push_back(list.substr(pos, comma - pos));
      pos = comma + 1;
    }
    return out;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--isa" && i + 1 < argc) {
      const std::string name = argv[++i];  // amx: the AVX-512 kernels with AMX tiles
      try {
        kernels::set_active_isa(name == "amx" ? kernels::Isa::avx512 : kernels::parse_isa(name));
        kernels::set_amx(name == "amx");
      } catch (const Error& e) {
        std::fprintf(stderr, "--isa %s: %s\n", name.c_str(), e.what());
        return 2;
      }
    } else if (arg == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      std::string list = argv[++i];
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        thread_counts.push_back(std::stoi(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (arg == "--precision" && i + 1 < argc) {
      kernels::set_matmul_precision(kernels::parse_matmul_precision(argv[++i]));
    } else if (arg == "--weights" && i + 1 < argc) {
      weight_dtypes.clear();
      for (const std::string& name : split(argv[++i])) weight_dtypes.push_back(dtype_named(name));
    } else if (arg == "--gemm") {
      gemm = true;
    } else if (arg == "--m" && i + 1 < argc) {
      gemm_ms.clear();
      for (const std::string& m : split(argv[++i])) gemm_ms.push_back(std::stoll(m));
    } else if (arg == "--shapes" && i + 1 < argc) {
      shapes.clear();
      for (const std::string& shape : split(argv[++i])) {
        long long m = 0, k = 0, n = 0;
        if (std::sscanf(shape.c_str(), "%lldx%lldx%lld", &m, &k, &n) != 3 || m < 1 || k < 1 ||
            n < 1) {
          std::fprintf(stderr, "--shapes: expected MxKxN, got '%s'\n", shape.c_str());
          return 2;
        }
        shapes.push_back({m, k, n});
      }
    } else if (arg == "--decode") {
      decode_only = true;
    } else if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--isa scalar|avx2|avx512|amx] [--threads 1,2] [--precision f32|bf16] "
          "[--json]\n"
          "          [--weights bf16,f32,q8_0,q4_0,q4_1,q5_0,q5_1,q4_k,q5_k,q6_k] [--decode]\n"
          "          [--shapes MxKxN,...]\n"
          "       %s --gemm [--isa avx2|avx512|amx] [--threads 1,2] [--m 1,8,32,128,512] "
          "[--json]\n",
          argv[0], argv[0]);
      return 2;
    }
  }
  if (gemm) return run_gemm(thread_counts, gemm_ms, json);
  const auto isa = kernel_set_name();
  const auto precision = kernels::matmul_precision_name(kernels::matmul_precision());
  for (int threads : thread_counts) {
    ThreadPool pool(threads);
    if (!json)
      std::printf("memory read bandwidth (256 MiB, %d threads): %.1f GB/s\n", threads,
                  read_gbps(size_t{256} << 20, pool));
  }
  if (!json)
    std::printf(
        "isa=%.*s precision=%.*s (cpu columns: from process CPU time / threads)\n"
        "%5s %5s %5s %5s %3s %5s %10s %9s %9s %9s %9s\n",
        static_cast<int>(isa.size()), isa.data(), static_cast<int>(precision.size()),
        precision.data(), "m", "k", "n", "w", "thr", "cache", "us/call", "GFLOP/s", "wGB/s",
        "cpuGFLOP", "cpuwGB/s");
  for (const Shape& s : shapes) {
    if (decode_only && s.m != 1) continue;
    for (DType dtype : weight_dtypes) {
      // k-quant rows are whole 256-element super-blocks: not k = 896 (llama.cpp's q4_k_m
      // stores such rows in another type).
      if (is_block_dtype(dtype) && s.k % (is_k(dtype) ? 256 : 32) != 0) continue;
      for (int threads : thread_counts) {
        ThreadPool pool(threads);
        const size_t w_bytes = static_cast<size_t>(s.n) * dtype_bytes(dtype, s.k);
        // 96 MiB of distinct weights defeats a 32 MiB L3; big-m runs are compute-bound.
        const int cold_copies = static_cast<int>(std::max<size_t>(2, (96u << 20) / w_bytes));
        for (bool cold : {false, true}) {
          if (cold && s.m > 8) continue;  // batched decode streams weights too
          const Result r = time_linear(s.m, s.k, s.n, dtype, cold ? cold_copies : 1, pool);
          const double gflops = 2.0 * s.m * s.n * s.k / r.seconds_per_call / 1e9;
          const double gbps = static_cast<double>(w_bytes) / r.seconds_per_call / 1e9;
          const double cpu_gflops = 2.0 * s.m * s.n * s.k / r.cpu_per_call / 1e9;
          const double cpu_gbps = static_cast<double>(w_bytes) / r.cpu_per_call / 1e9;
          const auto dt = dtype_name(dtype);
          if (json) {
            std::printf(
                "{\"op\":\"linear\",\"isa\":\"%.*s\",\"precision\":\"%.*s\",\"m\":%lld,\"k\":%lld,"
                "\"n\":%lld,"
                "\"w\":\"%.*s\",\"threads\":%d,\"cache\":\"%s\",\"us_per_call\":%.2f,"
                "\"gflops\":%.2f,\"weight_gbps\":%.2f,\"cpu_gflops\":%.2f,\"cpu_weight_gbps\":%.2f}"
                "\n",
                static_cast<int>(isa.size()), isa.data(), static_cast<int>(precision.size()),
                precision.data(), static_cast<long long>(s.m), static_cast<long long>(s.k),
                static_cast<long long>(s.n), static_cast<int>(dt.size()), dt.data(), threads,
                cold ? "cold" : "hot", r.seconds_per_call * 1e6, gflops, gbps, cpu_gflops,
                cpu_gbps);
          } else {
            std::printf("%5lld %5lld %5lld %5.*s %3d %5s %10.1f %9.1f %9.1f %9.1f %9.1f\n",
                        static_cast<long long>(s.m), static_cast<long long>(s.k),
                        static_cast<long long>(s.n), static_cast<int>(dt.size()), dt.data(),
                        threads, cold ? "cold" : "hot", r.seconds_per_call * 1e6, gflops, gbps,
                        cpu_gflops, cpu_gbps);
          }
        }
      }
    }
  }
  return 0;
}
