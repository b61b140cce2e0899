#include "model/micro_batches.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace deepinfer::model {
namespace {

struct Step {
  std::vector<int32_t> tokens, positions;
  ForwardBatch batch;
};

// Sequences of the given token counts laid out back to back; logits wanted at each
// sequence's last row, listed in reverse sequence order.
Step make_step(const std::vector<int64_t>& counts) {
  Step step;
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  step.tokens.resize(static_cast<size_t>(total));
  std::iota(step.tokens.begin(), step.tokens.end(), 100);
  step.positions.assign(step.tokens.size(), 0);
  int64_t at = 0;
  for (int64_t c : counts) {
    step.batch.sequences.push_back({at, c, {}});
    at += c;
  }
  for (auto s = counts.size(); s-- > 0;) {
    const auto& seq = step.batch.sequences[s];
    step.batch.logit_rows.push_back(seq.begin + seq.count - 1);
  }
  step.batch.tokens = step.tokens;
  step.batch.positions = step.positions;
  return step;
}

TEST(MicroBatches, CutsByTokensAndKeepsLogitSlots) {
  const Step step = make_step({6, 1, 1, 4});  // 12 tokens: halves at 6
  const auto parts = split_micro_batches(step.batch, 2);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].first_token, 0);
  EXPECT_EQ(parts[0].batch.tokens.size(), 6u);
  EXPECT_EQ(parts[0].batch.sequences.size(), 1u);
  EXPECT_EQ(parts[1].first_token, 6);
  ASSERT_EQ(parts[1].batch.sequences.size(), 3u);
  EXPECT_EQ(parts[1].batch.sequences[0].begin, 0);
  EXPECT_EQ(parts[1].batch.sequences[2].begin, 2);
  EXPECT_EQ(parts[1].batch.tokens[0], 106);
  // Step logit rows were {11, 7, 6, 5}: part 0 holds row 5 (slot 3), part 1 rows 11, 7, 6.
  EXPECT_EQ(parts[0].batch.logit_rows, (std::vector<int64_t>{5}));
  EXPECT_EQ(parts[0].logit_slots, (std::vector<int64_t>{3}));
  EXPECT_EQ(parts[1].batch.logit_rows, (std::vector<int64_t>{5, 1, 0}));
  EXPECT_EQ(parts[1].logit_slots, (std::vector<int64_t>{0, 1, 2}));
}

TEST(MicroBatches, NeverMorePartsThanSequences) {
  const Step step = make_step({1, 1, 1});
  const auto parts = split_micro_batches(step.batch, 8);
  ASSERT_EQ(parts.size(), 3u);
  for (const auto& p : parts) EXPECT_EQ(p.batch.tokens.size(), 1u);
  EXPECT_EQ(split_micro_batches(step.batch, 1).size(), 1u);
  const Step empty = make_step({});
  EXPECT_EQ(split_micro_batches(empty.batch, 4).size(), 1u);
}

}  // namespace
}  // namespace deepinfer::model
