// The residual step of a decoder layer, fused (kernels::add_rms_norm) against add() then
// rms_norm(), per ISA, on the rows of a decode step and of a prefill (hidden 896, the
// Qwen2.5-0.5B shape by default). Prints ns per call and the ratio.
//
//   cmake --build build --target norm_bench && ./build/norm_bench [--dim 896] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/kernels.h"

using namespace deepinfer;

namespace {

template <typename Fn>
double ns_per_call(Fn fn, int64_t bytes_per_call) {
  // Enough calls for ~0.2 s, best of 5 rounds.
  const int calls = static_cast<int>(std::max<int64_t>(20, (int64_t{400} << 20) / bytes_per_call));
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, ns / calls);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t dim = 896;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dim" && i + 1 < argc) {
      dim = std::stoll(argv[++i]);
    } else if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: %s [--dim 896] [--json]\n", argv[0]);
      return 2;
    }
  }
  if (json) std::printf("[\n");
  bool first = true;
  for (kernels::Isa isa : kernels::supported_isas()) {
    kernels::set_active_isa(isa);
    for (int64_t rows : {int64_t{1}, int64_t{128}, int64_t{512}}) {
      const auto n = static_cast<size_t>(rows * dim);
      std::vector<float> residual(n, 0.5f), x(n, 0.25f), y(n), weight(static_cast<size_t>(dim), 1);
      for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
      const int64_t bytes = static_cast<int64_t>(n * sizeof(float)) * 3;
      // The residual drifts by x per call in both variants alike; values stay finite.
      const double two_step = ns_per_call(
          [&] {
            kernels::add(residual.data(), x.data(), residual.data(), rows * dim);
            kernels::rms_norm(residual.data(), weight.data(), rows, dim, 1e-6f, y.data());
          },
          bytes);
      std::fill(residual.begin(), residual.end(), 0.5f);
      const double fused = ns_per_call(
          [&] {
            kernels::add_rms_norm(residual.data(), x.data(), weight.data(), rows, dim, 1e-6f,
                                  y.data());
          },
          bytes);
      if (json) {
        std::printf(
            "%s  {\"isa\": \"%s\", \"rows\": %lld, \"dim\": %lld, \"add_then_norm_ns\": "
            "%.1f, \"fused_ns\": %.1f}",
            first ? "" : ",\n", std::string(kernels::isa_name(isa)).c_str(),
            static_cast<long long>(rows), static_cast<long long>(dim), two_step, fused);
      } else {
        std::printf("%-7s rows %4lld dim %lld: add + rms_norm %10.1f ns, fused %10.1f ns (x%.2f)\n",
                    std::string(kernels::isa_name(isa)).c_str(), static_cast<long long>(rows),
                    static_cast<long long>(dim), two_step, fused, two_step / fused);
      }
      first = false;
    }
  }
  if (json) std::printf("\n]\n");
  kernels::clear_active_isa_override();
  return 0;
}
