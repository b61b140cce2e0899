// Throughput of kernels::linear (standalone driver; not yet wired into CMake).
//
//   g++ -std=c++20 -O2 -Isrc bench/kernels_bench.cpp build/libdeepinfer.a -lpthread
//       $(pkg-config --libs libpcre2-8 libutf8proc) -o kernels_bench
//   ./kernels_bench [--isa scalar|avx2|avx512] [--threads 1,2] [--precision f32|bf16] [--json]
//                   [--weights bf16,f32,q8_0,q4_1,q5_0,q5_1,q4_k,q5_k,q6_k] [--decode]
//
// --weights picks the weight dtypes (default bf16,f32); --decode keeps the m = 1 shapes only.
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
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

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

Result time_linear(int64_t m, int64_t k, int64_t n, DType dtype, int copies, ThreadPool& pool) {
  const size_t w_bytes = static_cast<size_t>(n) * dtype_bytes(dtype, k);
  std::vector<std::vector<unsigned char>> weights(static_cast<size_t>(copies));
  std::vector<float> src(static_cast<size_t>(n * k));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  for (auto& w : weights) {
    w.resize(w_bytes);
    if (is_block_dtype(dtype)) {
      fill_blocks(w);
    } else {
      convert_from_f32(src.data(), w.data(), dtype, src.size());
    }
  }
  std::vector<float> x(static_cast<size_t>(m * k), 0.25f), y(static_cast<size_t>(m * n));
  auto call = [&](int i) {
    kernels::linear(x.data(), m, k, weights[static_cast<size_t>(i % copies)].data(), dtype, n,
                    nullptr, y.data(), pool);
  };
  for (int i = 0; i < copies; ++i) call(i);  // warm-up (page faults, thread wake-up)
  std::vector<double> samples, cpu_samples;
  for (int rep = 0; rep < 7; ++rep) {
    int calls = 0;
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    double elapsed = 0.0;
    while (elapsed < 0.05 || calls < copies) {
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

// parse_dtype() knows the element types; the block types by their dtype_name().
DType dtype_named(const std::string& name) {
  for (DType d : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q4_k,
                  DType::q5_k, DType::q6_k})
    if (name == dtype_name(d)) return d;
  return parse_dtype(name);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  std::vector<DType> weight_dtypes = {DType::bf16, DType::f32};
  bool json = false;
  bool decode_only = false;
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
      kernels::set_active_isa(kernels::parse_isa(argv[++i]));
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
    } else if (arg == "--decode") {
      decode_only = true;
    } else if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--isa scalar|avx2|avx512] [--threads 1,2] [--precision f32|bf16] [--json]\n"
          "          [--weights bf16,f32,q8_0,q4_0,q4_1,q5_0,q5_1,q4_k,q5_k,q6_k] [--decode]\n",
          argv[0]);
      return 2;
    }
  }
  const auto isa = kernels::isa_name(kernels::active_isa());
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
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape s : {Shape{1, 896, 4864}, Shape{1, 4864, 896}, Shape{4, 896, 4864},
                  Shape{8, 896, 4864}, Shape{128, 896, 4864}}) {
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
