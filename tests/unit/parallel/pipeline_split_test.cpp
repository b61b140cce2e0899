#include "parallel/pipeline_split.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/error.h"

namespace deepinfer::parallel {
namespace {

std::vector<std::pair<int64_t, int64_t>> ranges(int64_t layers, int64_t stages) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t s = 0; s < stages; ++s) {
    const LayerRange r = pipeline_layers(layers, s, stages);
    out.emplace_back(r.begin, r.end);
  }
  return out;
}

// Expectations from vLLM's tests/distributed/test_pipeline_partition.py (get_pp_indices).
TEST(PipelineSplit, MatchesVllmUnevenSplits) {
  using R = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(ranges(20, 4), (R{{0, 5}, {5, 10}, {10, 15}, {15, 20}}));
  EXPECT_EQ(ranges(5, 3), (R{{0, 2}, {2, 4}, {4, 5}}));
  EXPECT_EQ(ranges(3, 2), (R{{0, 2}, {2, 3}}));
  EXPECT_EQ(ranges(2, 2), (R{{0, 1}, {1, 2}}));
  EXPECT_EQ(ranges(3, 3), (R{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(ranges(7, 1), (R{{0, 7}}));
}

TEST(PipelineSplit, RefusesMoreStagesThanLayers) {
  try {
    pipeline_layers(2, 0, 3, "tiny");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 is more than the 2 decoder layers of tiny"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::parallel
