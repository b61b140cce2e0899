#include "parallel/eplb.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace deepinfer::parallel {
namespace {

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace

Packing balanced_packing(std::span<const double> weight, int64_t num_packs) {
  const auto n = static_cast<int64_t>(weight.size());
  DI_CHECK(num_packs > 0 && n % num_packs == 0, "EPLB: ", n, " items cannot be packed into ",
           num_packs, " packs of equal size");
  const int64_t per_pack = n / num_packs;
  Packing out{std::vector<int64_t>(static_cast<size_t>(n)),
              std::vector<int64_t>(static_cast<size_t>(n))};
  if (per_pack == 1) {  // one item per pack: keep them where they are (nothing to balance)
    std::iota(out.pack.begin(), out.pack.end(), 0);
    std::fill(out.rank_in_pack.begin(), out.rank_in_pack.end(), 0);
    return out;
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Heaviest first; equal weights keep index order (stable), so the result is reproducible.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return weight[a] > weight[b]; });
  std::vector<double> load(static_cast<size_t>(num_packs), 0.0);
  std::vector<int64_t> items(static_cast<size_t>(num_packs), 0);
  for (const int64_t i : order) {
    int64_t best = -1;
    for (int64_t p = 0; p < num_packs; ++p) {
      if (items[p] == per_pack) continue;
      if (best < 0 || load[p] < load[best]) best = p;
    }
    out.pack[i] = best;
    out.rank_in_pack[i] = items[best]++;
    load[best] += weight[i];
  }
  return out;
}

Replication replicate_experts(std::span<const double> weight, int64_t num_physical) {
  const auto num_logical = static_cast<int64_t>(weight.size());
  DI_CHECK(num_logical > 0 && num_physical >= num_logical, "EPLB: ", num_physical,
           " physical experts cannot hold ", num_logical, " logical experts");
  Replication out;
  out.phy2log.resize(static_cast<size_t>(num_physical));
  out.replica_rank.assign(static_cast<size_t>(num_physical), 0);
  out.count.assign(static_cast<size_t>(num_logical), 1);
  std::iota(out.phy2log.begin(), out.phy2log.begin() + num_logical, 0);
  for (int64_t p = num_logical; p < num_physical; ++p) {
    int64_t best = 0;
    for (int64_t e = 1; e < num_logical; ++e) {
      if (weight[e] / static_cast<double>(out.count[e]) >
          weight[best] / static_cast<double>(out.count[best])) {
        best = e;
      }
    }
    out.phy2log[p] = best;
    out.replica_rank[p] = out.count[best]++;
  }
  return out;
}

std::vector<int64_t> ExpertPlacement::replicas(int64_t e) const {
  std::vector<int64_t> slots(static_cast<size_t>(count.at(static_cast<size_t>(e))), -1);
  for (int64_t p = 0; p < num_physical(); ++p) {
    if (phy2log[p] == e) slots[static_cast<size_t>(replica_rank[p])] = p;
  }
  return slots;
}

ExpertPlacement identity_placement(int64_t num_logical) {
  ExpertPlacement out;
  out.phy2log.resize(static_cast<size_t>(num_logical));
  std::iota(out.phy2log.begin(), out.phy2log.end(), 0);
  out.replica_rank.assign(static_cast<size_t>(num_logical), 0);
  out.count.assign(static_cast<size_t>(num_logical), 1);
  return out;
}

ExpertPlacement rebalance_experts_hierarchical(std::span<const double> weight, int64_t num_physical,
                                               int64_t num_groups, int64_t num_nodes,
                                               int64_t num_ranks) {
  const auto num_logical = static_cast<int64_t>(weight.size());
  DI_CHECK(num_groups > 0 && num_logical % num_groups == 0, "EPLB: ", num_groups,
           " expert groups do not divide the ", num_logical, " experts");
  DI_CHECK(num_nodes > 0 && num_groups % num_nodes == 0, "EPLB: ", num_nodes,
           " nodes do not divide the ", num_groups, " expert groups");
  DI_CHECK(num_ranks > 0 && num_ranks % num_nodes == 0, "EPLB: ", num_nodes,
           " nodes do not divide the ", num_ranks, " ranks");
  DI_CHECK(num_physical >= num_logical && num_physical % num_ranks == 0, "EPLB: ", num_physical,
           " physical experts (", num_logical, " + ", num_physical - num_logical,
           " redundant) cannot be split evenly over ", num_ranks, " ranks");
  const int64_t group_size = num_logical / num_groups;
  const int64_t groups_per_node = num_groups / num_nodes;
  const int64_t logical_per_node = num_logical / num_nodes;
  const int64_t physical_per_node = num_physical / num_nodes;
  const int64_t ranks_per_node = num_ranks / num_nodes;
  const int64_t slots_per_rank = num_physical / num_ranks;

  // Step 1: groups onto nodes. "mlog" numbers the experts node by node: node n holds mlog
  // [n * logical_per_node, (n + 1) * logical_per_node).
  std::vector<double> group_load(static_cast<size_t>(num_groups), 0.0);
  for (int64_t e = 0; e < num_logical; ++e) group_load[e / group_size] += weight[e];
  const Packing groups = balanced_packing(group_load, num_nodes);
  std::vector<int64_t> log2mlog(static_cast<size_t>(num_logical));
  for (int64_t e = 0; e < num_logical; ++e) {
    const int64_t g = e / group_size;
    log2mlog[e] =
        (groups.pack[g] * groups_per_node + groups.rank_in_pack[g]) * group_size + e % group_size;
  }
  const std::vector<int64_t> mlog2log = inverse(log2mlog);

  ExpertPlacement out;
  out.phy2log.resize(static_cast<size_t>(num_physical));
  out.replica_rank.resize(static_cast<size_t>(num_physical));
  out.count.resize(static_cast<size_t>(num_logical));
  for (int64_t node = 0; node < num_nodes; ++node) {
    // Step 2: replicas within the node.
    std::vector<double> node_load(static_cast<size_t>(logical_per_node));
    for (int64_t m = 0; m < logical_per_node; ++m) {
      node_load[m] = weight[mlog2log[node * logical_per_node + m]];
    }
    const Replication rep = replicate_experts(node_load, physical_per_node);
    // Step 3: the node's physical experts onto its ranks.
    std::vector<double> replica_load(static_cast<size_t>(physical_per_node));
    for (int64_t p = 0; p < physical_per_node; ++p) {
      const int64_t m = rep.phy2log[p];
      replica_load[p] = node_load[m] / static_cast<double>(rep.count[m]);
    }
    const Packing ranks = balanced_packing(replica_load, ranks_per_node);
    std::vector<int64_t> phy2slot(static_cast<size_t>(physical_per_node));
    for (int64_t p = 0; p < physical_per_node; ++p) {
      phy2slot[p] = ranks.pack[p] * slots_per_rank + ranks.rank_in_pack[p];
    }
    const std::vector<int64_t> slot2phy = inverse(phy2slot);
    for (int64_t s = 0; s < physical_per_node; ++s) {
      const int64_t p = slot2phy[s];
      const int64_t m = rep.phy2log[p] + node * logical_per_node;
      out.phy2log[node * physical_per_node + s] = mlog2log[m];
      out.replica_rank[node * physical_per_node + s] = rep.replica_rank[p];
    }
    for (int64_t m = 0; m < logical_per_node; ++m) {
      out.count[mlog2log[node * logical_per_node + m]] = rep.count[m];
    }
  }
  return out;
}

ExpertPlacement rebalance_experts(std::span<const double> weight, int64_t num_physical,
                                  int64_t num_groups, int64_t num_nodes, int64_t num_ranks) {
  if (num_groups > 0 && num_nodes > 0 && num_groups % num_nodes == 0 &&
      static_cast<int64_t>(weight.size()) % num_groups == 0) {
    return rebalance_experts_hierarchical(weight, num_physical, num_groups, num_nodes, num_ranks);
  }
  return rebalance_experts_hierarchical(weight, num_physical, 1, 1, num_ranks);
}

std::vector<double> predicted_rank_loads(const ExpertPlacement& placement,
                                         std::span<const double> weight, int64_t num_ranks) {
  std::vector<double> physical(static_cast<size_t>(placement.num_physical()));
  for (int64_t p = 0; p < placement.num_physical(); ++p) {
    const int64_t e = placement.phy2log[p];
    physical[p] = weight[e] / static_cast<double>(placement.count[e]);
  }
  return rank_loads(physical, num_ranks);
}

std::vector<double> rank_loads(std::span<const double> physical_load, int64_t num_ranks) {
  const auto slots = static_cast<int64_t>(physical_load.size());
  DI_CHECK(num_ranks > 0 && slots % num_ranks == 0, "EPLB: ", slots,
           " physical experts cannot be split evenly over ", num_ranks, " ranks");
  std::vector<double> out(static_cast<size_t>(num_ranks), 0.0);
  for (int64_t p = 0; p < slots; ++p) out[p / (slots / num_ranks)] += physical_load[p];
  return out;
}

double balancedness(std::span<const double> rank_load) {
  if (rank_load.empty()) return 1.0;
  double sum = 0, most = 0;
  for (double l : rank_load) {
    sum += l;
    most = std::max(most, l);
  }
  if (most <= 0) return 1.0;
  return sum / static_cast<double>(rank_load.size()) / most;
}

}  // namespace deepinfer::parallel
