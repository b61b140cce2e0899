// engine::argmax (vector passes) against the scalar rule it replaces: best = 0, then
// `if (v[i] > v[best]) best = i` — ties to the lowest index, NaN never wins.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/greedy.h"

namespace deepinfer::engine {
namespace {

int32_t scalar_argmax(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

TEST(Argmax, EqualsTheScalarRuleOnRandomRowsTiesAndSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-30.0f, 30.0f);
  std::vector<std::vector<float>> rows;
  for (const size_t n : {size_t{1}, size_t{5}, size_t{16}, size_t{17}, size_t{151936}}) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(rng);
    rows.push_back(v);
    std::vector<float> ties(n, 1.0f);  // all equal: index 0
    rows.push_back(ties);
    if (n > 3) {
      std::vector<float> later = v;  // the maximum twice: the first one
      later[n - 1] = 100.0f;
      later[n / 2] = 100.0f;
      rows.push_back(later);
      std::vector<float> nans = v;  // NaN is never the answer, nor blocks a later maximum
      nans[1] = nan;
      nans[n - 2] = nan;
      rows.push_back(nans);
      std::vector<float> first_nan = v;  // a NaN first entry is never replaced
      first_nan[0] = nan;
      rows.push_back(first_nan);
      std::vector<float> infs(n, -inf);  // nothing above -inf, then one +inf
      rows.push_back(infs);
      infs[n - 1] = inf;
      rows.push_back(infs);
      std::vector<float> zeros(n, -1.0f);  // -0 and +0 compare equal: the first zero
      zeros[2] = -0.0f;
      zeros[3] = 0.0f;
      rows.push_back(zeros);
    }
  }
  for (size_t r = 0; r < rows.size(); ++r)
    EXPECT_EQ(argmax(rows[r]), scalar_argmax(rows[r])) << "row " << r << " n " << rows[r].size();
}

}  // namespace
}  // namespace deepinfer::engine
