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

#include "core/dtype.h"
#include "kernels/isa.h"
#include "kernels/packed_weights.h"

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

// Writes v as a little-endian f16 at p (a block's scale in a ggml block).
inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// How far two f32 summation orders of a bf16 dot product may be apart: products of bf16 values
// are exact in f32, and any order is within (k + 1) * 2^-24 * sum |terms| of the exact sum, two
// orders within twice that. x and w are row i / j of [*, k] matrices already rounded to bf16.
inline double bf16_dot_tolerance(const float* x, const float* w, int64_t k, float bias) {
  double magnitude = std::fabs(bias);
  for (int64_t p = 0; p < k; ++p) magnitude += std::fabs(x[p] * w[p]);
  return 2.0 * static_cast<double>(k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30;
}

// Weight packing on for the guard's lifetime, then as it was: tests of the packed kernels pack
// whatever DEEPINFER_PACK_WEIGHTS says otherwise (an A/B run with it at 0 would skip or fail them).
class PackingOn {
 public:
  PackingOn() : was_(weight_packing()) { set_weight_packing(true); }
  ~PackingOn() { set_weight_packing(was_); }
  PackingOn(const PackingOn&) = delete;
  PackingOn& operator=(const PackingOn&) = delete;

 private:
  bool was_;
};

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
