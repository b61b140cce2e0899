#pragma once
// Summaries of benchmark latencies, computed as numpy (and so vLLM's benchmark) computes them:
// percentiles by linear interpolation between the closest ranks.
#include <cstddef>
#include <vector>

namespace deepinfer::bench {

struct Distribution {
  size_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, min = 0, max = 0;
};

// numpy.percentile(values, q) (q in [0, 100]) of sorted values; 0 when empty.
double percentile(const std::vector<double>& sorted, double q);

Distribution summarize(std::vector<double> values);

}  // namespace deepinfer::bench
