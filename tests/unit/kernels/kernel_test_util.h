#pragma once
// Shared helpers of the kernel tests: seeded random data, ISA parameterisation, tolerances.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/isa.h"

namespace deepinfer::kernels {
// gtest prints parameters through this (found by ADL).
inline void PrintTo(Isa isa, std::ostream* os) {
  *os << isa_name(isa);
}
}  // namespace deepinfer::kernels

namespace deepinfer::kernels::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

// Forces one ISA for the lifetime of the guard.
class IsaGuard {
 public:
  explicit IsaGuard(Isa isa) { set_active_isa(isa); }
  ~IsaGuard() { clear_active_isa_override(); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
};

// Fixture base: every test runs once per ISA this CPU supports.
class PerIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { guard_ = std::make_unique<IsaGuard>(GetParam()); }
  void TearDown() override { guard_.reset(); }

 private:
  std::unique_ptr<IsaGuard> guard_;
};

inline std::string isa_test_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

#define DI_INSTANTIATE_PER_ISA(Fixture)                                                 \
  INSTANTIATE_TEST_SUITE_P(Isa, Fixture,                                                \
                           ::testing::ValuesIn(::deepinfer::kernels::supported_isas()), \
                           ::deepinfer::kernels::testing::isa_test_name)

// (Empty ranges compare equal without touching the pointers: an empty vector's data() may be
// null, which memcmp must not get.)
inline bool bitwise_equal(const float* a, const float* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Index of the first element where |got - want| > abs_tol + rel_tol * |want|, or -1.
inline int64_t first_mismatch(const std::vector<float>& got, const std::vector<float>& want,
                              float rel_tol, float abs_tol) {
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float diff = std::fabs(got[i] - want[i]);
    if (!(diff <= abs_tol + rel_tol * std::fabs(want[i]))) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace deepinfer::kernels::testing
