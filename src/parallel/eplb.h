#pragma once
// Expert-parallel load balancing (EPLB): where each MoE layer's experts live, given how many
// tokens each expert received. The algorithm is DeepSeek's (github.com/deepseek-ai/EPLB):
//   1. balanced_packing: heaviest item first into the lightest pack that still has room, so
//      every pack ends with the same number of items and loads as even as greedy gets;
//   2. replicate_experts: the extra physical slots go one at a time to the expert whose load
//      per replica is the largest (each replica takes an equal share of its expert's tokens);
//   3. hierarchical placement (when the expert groups divide over the nodes): groups packed
//      onto nodes (group-limited routing then keeps a token's experts on few nodes), experts
//      replicated within each node, the node's physical experts packed onto its ranks. With
//      one node, or groups that do not divide, the same steps run with one group and one
//      node: the global policy.
// Everything is per layer, in doubles, deterministic: ties go to the lower index (expert,
// pack), so every rank computes the same placement from the same loads.
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::parallel {

struct Packing {
  std::vector<int64_t> pack;          // [items]: the pack of each item
  std::vector<int64_t> rank_in_pack;  // [items]: its position in the pack (order of admission)
};

// Packs `weight.size()` items into `num_packs` packs of weight.size() / num_packs items each
// (num_packs must divide it).
Packing balanced_packing(std::span<const double> weight, int64_t num_packs);

struct Replication {
  std::vector<int64_t> phy2log;       // [num_physical]: the logical expert of each replica
  std::vector<int64_t> replica_rank;  // [num_physical]: which replica of its expert it is
  std::vector<int64_t> count;         // [num_logical]: replicas per logical expert (>= 1)
};

// The first num_logical replicas are the experts themselves (0, 1, ...); each further one
// copies the expert with the largest weight / replicas so far.
Replication replicate_experts(std::span<const double> weight, int64_t num_physical);

// One layer's placement: physical slot p lives on rank p / (num_physical / num_ranks).
struct ExpertPlacement {
  std::vector<int64_t> phy2log;       // [num_physical]
  std::vector<int64_t> replica_rank;  // [num_physical]
  std::vector<int64_t> count;         // [num_logical]

  int64_t num_physical() const { return static_cast<int64_t>(phy2log.size()); }
  int64_t num_logical() const { return static_cast<int64_t>(count.size()); }
  // The physical slots of logical expert e, in replica order.
  std::vector<int64_t> replicas(int64_t e) const;
  bool operator==(const ExpertPlacement&) const = default;
};

// The placement without load balancing: expert e in slot e (num_physical == num_logical),
// rank r holds experts [r E / W, (r + 1) E / W).
ExpertPlacement identity_placement(int64_t num_logical);

// DeepSeek's rebalance_experts_hierarchical for one layer: weight [num_logical], num_groups
// dividing num_logical and num_nodes dividing both num_groups and num_ranks, num_ranks
// dividing num_physical.
ExpertPlacement rebalance_experts_hierarchical(std::span<const double> weight, int64_t num_physical,
                                               int64_t num_groups, int64_t num_nodes,
                                               int64_t num_ranks);
// Hierarchical when num_nodes divides num_groups, else global (one group, one node).
ExpertPlacement rebalance_experts(std::span<const double> weight, int64_t num_physical,
                                  int64_t num_groups, int64_t num_nodes, int64_t num_ranks);

// Load of each rank when each replica takes an equal share of its expert's weight.
std::vector<double> predicted_rank_loads(const ExpertPlacement& placement,
                                         std::span<const double> weight, int64_t num_ranks);
// Sum of each rank's slots' loads, from per-physical-slot loads.
std::vector<double> rank_loads(std::span<const double> physical_load, int64_t num_ranks);
// mean / max over ranks (1 when every rank is idle): 1 is perfect balance, 1 / ranks is all
// the load on one rank.
double balancedness(std::span<const double> rank_load);

}  // namespace deepinfer::parallel
