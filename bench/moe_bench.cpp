// The routed experts of one MoE layer step, DeepSeek-V2-Lite shape (64 experts of hidden 2048,
// intermediate 1408, bf16, top-6): the grouped job on packed panels (PackedExperts::run,
// enable_atb_moe = true) against one ExpertStack::forward per expert (false), for a prefill
// step of --tokens tokens and a decode step of one token. Token counts per expert are a fixed
// pseudo-random spread (the router's output is not part of this). Reports ms per layer step,
// GFLOP/s of the 3 projections and, for decode, the expert weight bytes read per second.
//
//   build/moe_bench [--threads 2] [--tokens 512] [--repeats 5] [--dtype bf16|f32]
//                   [--matmul-precision f32|bf16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/layers/moe/packed_experts.h"

using namespace deepinfer;

namespace {

constexpr int64_t kExperts = 64, kTopK = 6, kHidden = 2048, kInter = 1408;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Tensor random_stack(int64_t rows, int64_t cols, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  Tensor t = Tensor::zeros({kExperts, rows, cols}, dtype);
  for (int64_t e = 0; e < kExperts; ++e) {
    for (float& x : v) x = dist(rng);
    convert_from_f32(v.data(),
                     static_cast<std::byte*>(t.raw()) + e * rows * cols * dtype_size(dtype), dtype,
                     v.size());
  }
  return t;
}

// tokens x top-6 assignments over the experts, each token on 6 distinct experts.
std::vector<int64_t> spread(int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> counts(kExperts, 0), ids(kExperts);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < kExperts; ++e) ids[e] = e;
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int64_t s = 0; s < kTopK; ++s) ++counts[ids[s]];
  }
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int64_t tokens = 512;
  int repeats = 5;
  DType dtype = DType::bf16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--threads")
      threads = std::stoi(value);
    else if (flag == "--tokens")
      tokens = std::stoll(value);
    else if (flag == "--repeats")
      repeats = std::stoi(value);
    else if (flag == "--dtype")
      dtype = value == "f32" ? DType::f32 : DType::bf16;
    else if (flag == "--matmul-precision")
      kernels::set_matmul_precision(kernels::parse_matmul_precision(value));
    else {
      std::fprintf(
          stderr, "usage: moe_bench [--threads T] [--tokens N] [--repeats R] [--dtype bf16|f32]\n");
      return 2;
    }
  }
  ThreadPool pool(threads);
  const model::ExpertStack stack(random_stack(2 * kInter, kHidden, dtype, 1),
                                 random_stack(kHidden, kInter, dtype, 2));
  const model::PackedExperts packed = model::PackedExperts::pack(stack, /*huge_pages=*/true);
  std::printf(
      "moe_bench: %s experts %lld x (%lld, %lld), %d threads, matmul precision %s, packed: %s\n",
      std::string(dtype_name(dtype)).c_str(), static_cast<long long>(kExperts),
      static_cast<long long>(kHidden), static_cast<long long>(kInter), threads,
      std::string(kernels::matmul_precision_name(kernels::matmul_precision())).c_str(),
      packed.defined() ? "yes" : "no");
  for (const int64_t step_tokens : {tokens, int64_t{1}}) {
    const std::vector<int64_t> counts = spread(step_tokens, 3);
    const int64_t rows = step_tokens * kTopK;
    std::vector<float> x(static_cast<size_t>(rows * kHidden)), y(x.size());
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : x) v = dist(rng);
    int64_t used = 0;
    for (int64_t c : counts) used += c > 0;
    const double flops = 2.0 * 3 * kHidden * kInter * static_cast<double>(rows);
    const double bytes = static_cast<double>(used) * 3 * kHidden * kInter * dtype_size(dtype);
    for (const bool fused : {true, false}) {
      if (fused && !packed.defined()) continue;
      double best = 1e30;
      for (int r = 0; r < repeats; ++r) {
        // Decode: cycle through 24 steps' worth of experts so that the weights come from DRAM.
        const double start = now_s();
        if (fused) {
          packed.run(x.data(), counts, 1, y.data(), pool);
        } else {
          int64_t at = 0;
          for (int64_t e = 0; e < kExperts; ++e) {
            stack.forward(e, x.data() + at * kHidden, counts[e], y.data() + at * kHidden, pool);
            at += counts[e];
          }
        }
        best = std::min(best, now_s() - start);
      }
      std::printf(
          "  %-8s %5lld tokens (%lld experts used): %-22s %8.3f ms  %7.1f GFLOP/s  %6.1f GB/s\n",
          step_tokens == 1 ? "decode" : "prefill", static_cast<long long>(step_tokens),
          static_cast<long long>(used), fused ? "grouped packed job" : "per-expert forward",
          best * 1e3, flops / best * 1e-9, bytes / best * 1e-9);
    }
  }
  return 0;
}
