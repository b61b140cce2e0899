#pragma once
// When requests are sent: a Poisson process of --request-rate (exponential gaps from a
// generator seeded by --seed, as vLLM's benchmark with burstiness 1), or all at once for inf;
// and until when: --num_samples requests, or --duration seconds, whichever ends first.
#include <cmath>
#include <cstdint>
#include <random>

namespace deepinfer::cli::bench {

class ArrivalSchedule {
 public:
  ArrivalSchedule(double rate, uint64_t seed)
      : rate_(rate), rng_(seed), gap_(std::isinf(rate) ? 1.0 : rate) {}
  // The send time (seconds from the run's start) of the next request: the first at 0.
  double next() {
    const double t = time_;
    if (!std::isinf(rate_)) time_ += gap_(rng_);
    return t;
  }

 private:
  double rate_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  double time_ = 0;
};

struct RunLimits {
  int64_t count = 0;            // 0: no count limit (a duration is set)
  double duration_s = 0;        // 0: no time limit
  int64_t max_concurrency = 0;  // 0: none

  // `send_time`: when the next request would go (its schedule, or now if later).
  bool may_send(int64_t sent, double send_time) const {
    return (count == 0 || sent < count) && (duration_s == 0 || send_time < duration_s);
  }
};

}  // namespace deepinfer::cli::bench
