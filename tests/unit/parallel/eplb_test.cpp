// The EPLB placement algorithm against placements checked by hand (the arithmetic is in the
// comments) and against the example of DeepSeek's EPLB README (its printed output).
#include "parallel/eplb.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace deepinfer::parallel {
namespace {

using Ids = std::vector<int64_t>;

// Heaviest first into the lightest pack with room (ties: lower pack): 5 -> p0, 4 -> p1,
// 3 -> p1 (4 < 5), 2 -> p0 (5 < 7), 1 -> p0 (7 = 7: lower; p0 full), 1 -> p1.
TEST(Eplb, BalancedPackingByHand) {
  const std::vector<double> w = {5, 4, 3, 2, 1, 1};
  const Packing p = balanced_packing(w, 2);
  EXPECT_EQ(p.pack, (Ids{0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(p.rank_in_pack, (Ids{0, 0, 1, 1, 2, 2}));
  // One item per pack: left in place whatever the weights.
  EXPECT_EQ(balanced_packing(std::vector<double>{1, 9, 5}, 3).pack, (Ids{0, 1, 2}));
  EXPECT_THROW(balanced_packing(w, 4), Error);
}

// Slots 3 and 4 go to the largest weight per replica: 6/1 -> e0; then 6/2 = 3 ties e2's 3/1
// and the lower expert wins -> e0 again.
TEST(Eplb, ReplicateExpertsByHand) {
  const Replication r = replicate_experts(std::vector<double>{6, 2, 3}, 5);
  EXPECT_EQ(r.phy2log, (Ids{0, 1, 2, 0, 0}));
  EXPECT_EQ(r.replica_rank, (Ids{0, 0, 0, 1, 2}));
  EXPECT_EQ(r.count, (Ids{3, 1, 1}));
}

// Global policy, 8 experts (expert 0 hot), 2 redundant slots over 2 ranks of 5: e0 gets both
// extra slots (8 > 2, then 4 > 2), three replicas of 8/3. Packing the replicas by load
// (8/3, 8/3, 8/3, 2, 1 x 6): r0 = {e0, e0, e2, e4, e6} = 8.33, r1 = {e0, e7, e1, e3, e5} = 7.67.
TEST(Eplb, GlobalPlacementSpreadsAHotExpertByHand) {
  const std::vector<double> w = {8, 1, 1, 1, 1, 1, 1, 2};
  const ExpertPlacement p = rebalance_experts(w, 10, 1, 1, 2);
  EXPECT_EQ(p.phy2log, (Ids{0, 0, 2, 4, 6, 0, 7, 1, 3, 5}));
  EXPECT_EQ(p.replica_rank, (Ids{0, 2, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(p.count, (Ids{3, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(p.replicas(0), (Ids{0, 5, 1}));
  const std::vector<double> after = predicted_rank_loads(p, w, 2);
  EXPECT_NEAR(after[0], 8.0 + 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(after[1], 7.0 + 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(balancedness(after), 8.0 / (8.0 + 1.0 / 3.0), 1e-12);
  // Without balancing: r0 = 8 + 1 + 1 + 1 = 11, r1 = 5; balancedness 8 / 11.
  EXPECT_NEAR(balancedness(predicted_rank_loads(identity_placement(8), w, 2)), 8.0 / 11.0, 1e-12);
}

// Two "nodes" of two ranks, four groups of two experts. Group loads [3, 30, 6, 8] packed onto
// the nodes: g1 -> n0, g3 -> n1, g2 -> n1 (8 < 30), g0 -> n0 (n1 full). Node 0 holds experts
// {2, 3, 0, 1} (loads 10, 20, 1, 2) packed onto its ranks: 20 -> r0, 10 -> r1, 2 -> r1,
// 1 -> r0, so slots [e3, e0 | e2, e1]; node 1 holds {6, 7, 4, 5} (4, 4, 3, 3): [e6, e4 | e7, e5].
TEST(Eplb, HierarchicalPlacementKeepsGroupsOnNodesByHand) {
  const std::vector<double> w = {1, 2, 10, 20, 3, 3, 4, 4};
  const ExpertPlacement p = rebalance_experts(w, 8, 4, 2, 4);
  EXPECT_EQ(p.phy2log, (Ids{3, 0, 2, 1, 6, 4, 7, 5}));
  EXPECT_EQ(p.count, (Ids(8, 1)));
  EXPECT_EQ(predicted_rank_loads(p, w, 4), (std::vector<double>{21, 12, 7, 7}));
  // One item per pack (2 groups, 2 nodes) is left in place: g0 on node 0.
  EXPECT_EQ(rebalance_experts_hierarchical(std::vector<double>{1, 2, 10, 20}, 4, 2, 2, 2).phy2log,
            (Ids{1, 0, 3, 2}));
  // 2 nodes do not divide 3 groups: rebalance_experts falls back to the global policy.
  const std::vector<double> six = {1, 2, 10, 20, 5, 5};
  EXPECT_EQ(rebalance_experts(six, 6, 3, 2, 2), rebalance_experts_hierarchical(six, 6, 1, 1, 2));
}

// github.com/deepseek-ai/EPLB README: 2 layers of 12 experts, 16 replicas, 4 groups, 2 nodes,
// 8 GPUs; its printed phy2log.
TEST(Eplb, DeepSeekReadmeExample) {
  const std::vector<std::vector<double>> weight = {
      {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
      {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};
  const std::vector<Ids> want = {{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
                                 {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}};
  for (size_t layer = 0; layer < 2; ++layer) {
    const ExpertPlacement p = rebalance_experts(weight[layer], 16, 4, 2, 8);
    EXPECT_EQ(p.phy2log, want[layer]) << "layer " << layer;
    int64_t slots = 0;
    for (int64_t c : p.count) slots += c;
    EXPECT_EQ(slots, 16);
  }
}

TEST(Eplb, Balancedness) {
  EXPECT_DOUBLE_EQ(balancedness(std::vector<double>{2, 2}), 1.0);
  EXPECT_DOUBLE_EQ(balancedness(std::vector<double>{4, 0}), 0.5);
  EXPECT_DOUBLE_EQ(balancedness(std::vector<double>{0, 0}), 1.0);
  EXPECT_EQ(rank_loads(std::vector<double>{1, 2, 3, 4}, 2), (std::vector<double>{3, 7}));
}

}  // namespace
}  // namespace deepinfer::parallel
