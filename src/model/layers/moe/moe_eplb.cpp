// MoeLayer's expert load balancing (docs/DISTRIBUTED.md, "Expert load balancing"): the
// placement at start, the global window load, and online re-balancing with weights moved
// between ranks.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "model/layers/moe/moe_layer.h"

namespace deepinfer::model {
namespace {

int64_t expert_groups(const MoeConfig& config) {
  return config.router.method == TopkMethod::greedy ? 1
                                                    : std::max<int64_t>(config.router.n_group, 1);
}

std::string three_digits(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", value);
  return text;
}

std::string describe(const std::vector<double>& loads) {
  std::string out;
  for (double l : loads) out += str_cat(out.empty() ? "" : " ", static_cast<int64_t>(l));
  return out;
}

}  // namespace

parallel::ExpertPlacement MoeLayer::initial_placement(const MoeConfig& config, int world,
                                                      const parallel::EplbState* eplb,
                                                      const std::string& name) {
  const int64_t experts = config.router.num_experts;
  if (eplb == nullptr || !eplb->options().active()) return parallel::identity_placement(experts);
  const parallel::EplbOptions& options = eplb->options();
  const int64_t redundant = options.num_redundant_experts;
  DI_CHECK(redundant >= 0 && redundant % world == 0, "--num-redundant-experts ", redundant,
           " must be a multiple of the ", world,
           " expert-parallel ranks (every rank holds the same "
           "number of expert slots)");
  const int64_t slots = experts + redundant;
  std::optional<std::vector<double>> load = eplb->recorded_load(name);
  if (load) {
    DI_CHECK(static_cast<int64_t>(load->size()) == experts, options.load_file, ": layer ", name,
             " has ", load->size(), " expert loads but the model has ", experts, " experts");
  } else if (redundant > 0) {
    load = std::vector<double>(static_cast<size_t>(experts), 1.0);  // no load known yet
  } else {
    return parallel::identity_placement(experts);
  }
  return parallel::rebalance_experts(*load, slots, expert_groups(config), options.num_nodes, world);
}

void MoeLayer::set_placement(parallel::ExpertPlacement placement) const {
  placement_ = std::move(placement);
  replicas_.assign(static_cast<size_t>(placement_.num_logical()), {});
  replicated_ = false;
  for (int64_t e = 0; e < placement_.num_logical(); ++e) {
    replicas_[static_cast<size_t>(e)] = placement_.replicas(e);
    replicated_ = replicated_ || replicas_[static_cast<size_t>(e)].size() > 1;
  }
}

void MoeLayer::synchronize_load() const {
  const int64_t world = comm_->world_size();
  const int64_t experts = config_.router.num_experts;
  // One bucket: every rank's counters since the last sync, summed over the group.
  std::vector<uint64_t> mine(pending_load_);
  mine.insert(mine.end(), pending_rank_rows_.begin(), pending_rank_rows_.end());
  const std::vector<uint64_t> all = world > 1 ? comm_->all_gather<uint64_t>(mine) : mine;
  std::vector<uint64_t> bucket(mine.size(), 0);
  for (size_t i = 0; i < all.size(); ++i) bucket[i % mine.size()] += all[i];
  std::fill(pending_load_.begin(), pending_load_.end(), 0);
  std::fill(pending_rank_rows_.begin(), pending_rank_rows_.end(), 0);
  const parallel::EplbOptions& options = eplb_->options();
  const auto buckets = static_cast<size_t>(std::max<int64_t>(
      1, (options.window + options.sync_interval() - 1) / options.sync_interval()));
  window_.push_back(std::move(bucket));
  if (window_.size() > buckets) window_.erase(window_.begin());

  std::vector<double> load(static_cast<size_t>(experts), 0.0),
      rows(static_cast<size_t>(world), 0.0);
  parallel::LayerBalance balance;
  balance.name = name_;
  balance.forward_calls = calls_;
  balance.load.assign(static_cast<size_t>(experts), 0);
  for (const auto& b : window_) {
    for (int64_t e = 0; e < experts; ++e) {
      balance.load[static_cast<size_t>(e)] += b[static_cast<size_t>(e)];
      load[static_cast<size_t>(e)] += static_cast<double>(b[static_cast<size_t>(e)]);
    }
    for (int64_t r = 0; r < world; ++r) {
      rows[static_cast<size_t>(r)] += static_cast<double>(b[static_cast<size_t>(experts + r)]);
    }
  }
  const std::vector<double> default_rows =
      parallel::predicted_rank_loads(parallel::identity_placement(experts), load, world);
  balance.placement = placement_.phy2log;
  balance.balancedness_default = parallel::balancedness(default_rows);
  balance.balancedness = parallel::balancedness(rows);
  balance.rebalances = rebalances_;
  balance.dropped = dropped_;

  const bool due = options.interval > 0 && calls_ % options.interval == 0;
  if (due) {
    parallel::ExpertPlacement next = parallel::rebalance_experts(
        load, placement_.num_physical(), expert_groups(config_), options.num_nodes, world);
    if (next.phy2log != placement_.phy2log) {
      const double before =
          parallel::balancedness(parallel::predicted_rank_loads(placement_, load, world));
      const double after =
          parallel::balancedness(parallel::predicted_rank_loads(next, load, world));
      migrate(next);
      set_placement(std::move(next));
      balance.rebalances = ++rebalances_;
      balance.placement = placement_.phy2log;
      if (comm_->rank() == 0) {  // every rank re-places alike; one says so
        log::info(
            "EPLB ", name_, ": re-balanced at forward call ", calls_, "; predicted balancedness ",
            three_digits(before), " -> ", three_digits(after),
            " (rank loads of the window: ", describe(rows), "); placement ",
            describe(std::vector<double>(placement_.phy2log.begin(), placement_.phy2log.end())));
      }
    }
  }
  eplb_->set_rank_loads(eplb_layer_, default_rows, rows);
  eplb_->report(eplb_layer_, std::move(balance));
}

void MoeLayer::migrate(const parallel::ExpertPlacement& next) const {
  const int64_t world = comm_->world_size();
  const int me = comm_->rank();
  const int64_t per_rank = placement_.num_physical() / world;
  DI_CHECK(next.num_physical() == placement_.num_physical(), "EPLB: placements of ",
           next.num_physical(), " and ", placement_.num_physical(), " slots");
  // Rank d takes expert e from its own current slots when it has one, else from e's first
  // slot: every rank computes the same sources, so no request needs to travel.
  const auto source_for = [&](int64_t e, int64_t d) {
    int64_t first = -1;
    for (int64_t p = 0; p < placement_.num_physical(); ++p) {
      if (placement_.phy2log[p] != e) continue;
      if (p / per_rank == d) return p;
      if (first < 0) first = p;
    }
    return first;
  };
  const int parts = experts_.parts();
  size_t each = 0;
  for (int part = 0; part < parts; ++part) each += experts_.expert_bytes(0, part).size();
  std::vector<int64_t> send_bytes(static_cast<size_t>(world), 0), recv_bytes = send_bytes;
  std::vector<std::byte> send;
  for (int64_t d = 0; d < world; ++d) {
    for (int64_t q = d * per_rank; q < (d + 1) * per_rank; ++q) {
      const int64_t from = source_for(next.phy2log[q], d);
      if (from / per_rank == d) continue;  // the destination has it already
      if (from / per_rank == me) {
        for (int part = 0; part < parts; ++part) {
          const auto bytes = experts_.expert_bytes(from % per_rank, part);
          send.insert(send.end(), bytes.begin(), bytes.end());
        }
        send_bytes[static_cast<size_t>(d)] += static_cast<int64_t>(each);
      }
      if (d == me) recv_bytes[static_cast<size_t>(from / per_rank)] += static_cast<int64_t>(each);
    }
  }
  int64_t total = 0;
  for (int64_t b : recv_bytes) total += b;
  std::vector<std::byte> recv(static_cast<size_t>(total));
  comm_->all_to_all_v_bytes(send, send_bytes, recv, recv_bytes);

  ExpertStack fresh = experts_.empty_like(per_rank);
  std::vector<int64_t> at(static_cast<size_t>(world), 0);  // read offset per source block
  for (int64_t r = 1; r < world; ++r) at[r] = at[r - 1] + recv_bytes[static_cast<size_t>(r - 1)];
  for (int64_t j = 0; j < per_rank; ++j) {
    const int64_t from = source_for(next.phy2log[me * per_rank + j], me);
    if (from / per_rank == me) {
      for (int part = 0; part < parts; ++part) {
        const auto bytes = experts_.expert_bytes(from % per_rank, part);
        std::memcpy(fresh.mutable_expert_bytes(j, part).data(), bytes.data(), bytes.size());
      }
      continue;
    }
    const std::byte* in = recv.data() + at[static_cast<size_t>(from / per_rank)];
    for (int part = 0; part < parts; ++part) {
      const auto into = fresh.mutable_expert_bytes(j, part);
      std::memcpy(into.data(), in, into.size());
      in += into.size();
    }
    at[static_cast<size_t>(from / per_rank)] += static_cast<int64_t>(each);
  }
  experts_ = std::move(fresh);
  repack_experts();
}

}  // namespace deepinfer::model
