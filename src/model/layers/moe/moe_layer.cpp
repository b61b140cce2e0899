#include "model/layers/moe/moe_layer.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scratch.h"
#include "kernels/kernels.h"
#include "model/layers/gated_mlp.h"
#include "model/layers/moe/dispatch_plan.h"

namespace deepinfer::model {
namespace {

int64_t experts_per_rank(const MoeConfig& config, const parallel::Communicator& comm,
                         const std::string& where) {
  const int64_t world = comm.world_size();
  DI_CHECK(config.router.num_experts % world == 0, where, ": ", config.router.num_experts,
           " experts cannot be split evenly over ", world, " expert-parallel ranks");
  return config.router.num_experts / world;
}

// Runs every local expert over the rows it received. `rows` is laid out as the all-to-all
// delivers it: one block per source rank, each block expert-major; counts[s * per_rank + j]
// rows of local expert j came from source s. Outputs go to `out` in the same layout.
void run_experts(const ExpertStack& experts, const float* rows, std::span<const int64_t> counts,
                 int64_t sources, float* out, ThreadPool& pool) {
  const int64_t h = experts.hidden();
  const ReceivedRows received(counts, sources, experts.count());
  // Experts whose rows are not contiguous run on gathered copies, at these offsets.
  std::vector<int64_t> copied(static_cast<size_t>(experts.count()), -1);
  int64_t copies = 0;
  for (int64_t j = 0; j < experts.count(); ++j) {
    if (received.total(j) > 0 && received.contiguous(j) < 0) {
      copied[static_cast<size_t>(j)] = copies;
      copies += received.total(j);
    }
  }
  std::vector<float> gathered(static_cast<size_t>(copies * h)), result(gathered.size());
  std::vector<ExpertStack::ExpertRows> work;
  for (int64_t j = 0; j < experts.count(); ++j) {
    const int64_t total = received.total(j);
    if (total == 0) continue;
    if (const int64_t at = copied[static_cast<size_t>(j)]; at >= 0) {
      received.gather(j, rows, h, gathered.data() + at * h);
      work.push_back({j, gathered.data() + at * h, total, result.data() + at * h});
    } else {
      const int64_t row = received.contiguous(j);
      work.push_back({j, rows + row * h, total, out + row * h});
    }
  }
  experts.forward_group(work, pool);
  for (int64_t j = 0; j < experts.count(); ++j)
    if (const int64_t at = copied[static_cast<size_t>(j)]; at >= 0)
      received.scatter(j, result.data() + at * h, h, out);
}

}  // namespace

MoeLayer::MoeLayer(MoeConfig config, MoeRouter router, ExpertStack experts,
                   std::unique_ptr<FeedForward> shared,
                   std::shared_ptr<parallel::Communicator> comm,
                   std::shared_ptr<parallel::EplbState> eplb, std::string name,
                   parallel::ExpertPlacement placement,
                   std::shared_ptr<parallel::Communicator> token_peers,
                   std::shared_ptr<parallel::Communicator> moe_tensor)
    : config_(std::move(config)),
      router_(std::move(router)),
      experts_(std::move(experts)),
      shared_(std::move(shared)),
      comm_(std::move(comm)),
      token_peers_(token_peers ? std::move(token_peers) : comm_),
      moe_tensor_(moe_tensor && moe_tensor->world_size() > 1 ? std::move(moe_tensor) : nullptr),
      eplb_(std::move(eplb)),
      name_(std::move(name)) {
  DI_CHECK(comm_ != nullptr, "MoE layer: no communicator (use SingleProcessCommunicator)");
  config_.router.validate("MoE layer");
  if (placement.phy2log.empty())
    placement = parallel::identity_placement(config_.router.num_experts);
  DI_CHECK(placement.num_logical() == config_.router.num_experts &&
               placement.num_physical() % comm_->world_size() == 0,
           "MoE layer: a placement of ", placement.num_physical(), " slots for ",
           placement.num_logical(), " experts does not fit ", config_.router.num_experts,
           " experts over ", comm_->world_size(), " ranks");
  if (placement.num_physical() == config_.router.num_experts) {
    experts_per_rank(config_, *comm_, "MoE layer");
  }
  const int64_t per_rank = placement.num_physical() / comm_->world_size();
  const int64_t shards = moe_tensor_ ? moe_tensor_->world_size() : 1;
  DI_CHECK(experts_.count() == per_rank && experts_.hidden() == config_.hidden &&
               experts_.intermediate() * shards == config_.intermediate,
           "MoE layer: expert stack of ", experts_.count(), " experts does not match the ",
           per_rank, " experts per rank of hidden ", config_.hidden, " / intermediate ",
           config_.intermediate, " over ", shards, " moe tensor shards");
  DI_CHECK((shared_ != nullptr) == (config_.shared_intermediate > 0),
           "MoE layer: shared experts given without shared_intermediate or the reverse");
  first_local_ = comm_->rank() * per_rank;
  set_capacity_factor(config_.capacity_factor);
  load_.assign(static_cast<size_t>(config_.router.num_experts), 0);
  pending_load_.assign(load_.size(), 0);
  pending_rank_rows_.assign(static_cast<size_t>(comm_->world_size()), 0);
  set_placement(std::move(placement));
  if (eplb_) eplb_layer_ = eplb_->register_layer(name_);
  repack_experts();
}

void MoeLayer::repack_experts() const {
  packed_ =
      config_.fused_experts ? PackedExperts::pack(experts_, config_.huge_pages) : PackedExperts();
  // Every step now reads the panels: the mapped bytes as stored would double the resident
  // experts. Stacks copied at load (per-expert checkpoint tensors, dtype changes, EPLB moves)
  // stay beside their panels (docs/CONFIG.md enable_atb_moe).
  if (packed_.defined()) experts_.release_pages();
  experts_.repack_blocks(config_.huge_pages);
}

std::unique_ptr<MoeLayer> MoeLayer::load(WeightLoader& weights, const std::string& prefix,
                                         const MoeConfig& config,
                                         std::shared_ptr<parallel::Communicator> comm) {
  DI_CHECK(comm != nullptr, prefix, ": MoE layer needs a communicator");
  DI_CHECK(config.hidden > 0 && config.intermediate > 0, prefix,
           ": MoE hidden and moe_intermediate_size must be positive");
  const parallel::MoeOptions& options = weights.moe_options();
  MoeConfig layer_config = config;
  layer_config.replicated_tokens = config.replicated_tokens || weights.expert_tokens_replicated();
  if (!layer_config.capacity_factor) layer_config.capacity_factor = options.capacity_factor;
  layer_config.fused_experts = config.fused_experts && options.fused_experts;
  layer_config.huge_pages = weights.memory_options().huge_pages;
  if (layer_config.communication_dtype == parallel::CommunicationDType::f32) {
    layer_config.communication_dtype = options.communication_dtype;
  }
  std::shared_ptr<parallel::EplbState> eplb = weights.eplb_state(*comm);
  parallel::ExpertPlacement placement =
      initial_placement(layer_config, comm->world_size(), eplb.get(), prefix);
  const int64_t per_rank = placement.num_physical() / comm->world_size();
  if (placement.num_physical() == config.router.num_experts) {
    experts_per_rank(config, *comm, prefix);
  }
  const MoeTensorNames& names = config.names;
  MoeRouter router = MoeRouter::load(weights, prefix + "." + names.router, config.hidden,
                                     config.router, prefix + "." + names.correction_bias);
  // Moe tensor parallelism: every expert (and the shared experts) split over the group, the
  // partial outputs summed once at the end of forward.
  auto moe_tensor = weights.moe_tensor_group();
  TensorSplit split = TensorSplit::over(moe_tensor);
  split.reduce = nullptr;
  const std::span<const int64_t> ids =
      std::span<const int64_t>(placement.phy2log)
          .subspan(static_cast<size_t>(comm->rank() * per_rank), static_cast<size_t>(per_rank));
  ExpertStack experts =
      ExpertStack::load(weights, prefix + "." + names.experts, config.router.num_experts, ids,
                        config.hidden, config.intermediate, split, names.expert);
  std::unique_ptr<FeedForward> shared;
  if (config.shared_intermediate > 0) {
    shared = GatedMlp::load(weights, prefix + ".shared_experts", config.hidden,
                            config.shared_intermediate, false, split);
  }
  return std::make_unique<MoeLayer>(std::move(layer_config), std::move(router), std::move(experts),
                                    std::move(shared), std::move(comm), std::move(eplb), prefix,
                                    std::move(placement), weights.expert_token_peers(),
                                    std::move(moe_tensor));
}

std::vector<int64_t> MoeLayer::local_expert_ids() const {
  const auto begin = placement_.phy2log.begin() + first_local_;
  return {begin, begin + experts_.count()};
}

void MoeLayer::set_capacity_factor(std::optional<double> capacity_factor) {
  DI_CHECK(!capacity_factor || *capacity_factor > 0, "MoE capacity_factor must be positive, got ",
           capacity_factor.value_or(0));
  config_.capacity_factor = capacity_factor;
}

void MoeLayer::reset_load_stats() {
  std::fill(load_.begin(), load_.end(), 0);
  dropped_ = 0;
}

void MoeLayer::forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  forward_shares(x, tokens, out, pool);
  // Combine and shared experts are linear in the shards: one sum gives the whole output.
  if (moe_tensor_)
    moe_tensor_->all_reduce_sum(
        std::span<float>(out, static_cast<size_t>(tokens * config_.hidden)));
  ++calls_;
  if (eplb_ && eplb_->options().active() && calls_ % eplb_->options().sync_interval() == 0) {
    synchronize_load();
  }
}

const float* MoeLayer::exchange_rows(std::span<const float> send,
                                     std::span<const int64_t> send_values, std::vector<float>& recv,
                                     std::vector<int64_t>& recv_values, ThreadPool& pool) const {
  if (comm_->world_size() == 1) {  // the rows are already where they go: exact, no copy
    recv_values.assign(send_values.begin(), send_values.end());
    return send.data();
  }
  if (config_.communication_dtype == parallel::CommunicationDType::f32) {
    comm_->all_to_all_v<float>(send, send_values, recv, recv_values);
    return recv.data();
  }
  const bool bf16 = config_.communication_dtype == parallel::CommunicationDType::bf16;
  std::vector<uint16_t> narrow(send.size());
  const auto n = static_cast<int64_t>(send.size());
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      narrow[static_cast<size_t>(i)] = bf16 ? f32_to_bf16(send[i]) : f32_to_f16(send[i]);
    }
  });
  std::vector<uint16_t> arrived;
  comm_->all_to_all_v<uint16_t>(narrow, send_values, arrived, recv_values);
  recv.resize(arrived.size());
  pool.parallel_for(static_cast<int64_t>(arrived.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      recv[static_cast<size_t>(i)] = bf16 ? bf16_to_f32(arrived[static_cast<size_t>(i)])
                                          : f16_to_f32(arrived[static_cast<size_t>(i)]);
    }
  });
  return recv.data();
}

void MoeLayer::forward_shares(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  // The ranks sharing these tokens split them: the whole expert group when attention is
  // replicated, this rank's attention group of it with attention data parallelism (the other
  // groups bring their own tokens to the same all-to-alls).
  parallel::Communicator& peers = *token_peers_;
  const int64_t world = peers.world_size();
  if (!config_.replicated_tokens || world == 1) {
    forward_own(x, tokens, out, pool);
    return;
  }
  // Each token's result depends on that token alone (batch-invariant kernels, combine in
  // slot order), so splitting the batch over the ranks changes no bit of it.
  const int64_t h = config_.hidden;
  const auto share = [&](int64_t r) { return tokens * r / world; };
  const int64_t begin = share(peers.rank());
  const int64_t mine = share(peers.rank() + 1) - begin;
  const int64_t most = (tokens + world - 1) / world;
  std::vector<float> padded(static_cast<size_t>(most * h));
  forward_own(x + begin * h, mine, padded.data(), pool);
  const std::vector<float> all = peers.all_gather<float>(padded);
  for (int64_t r = 0; r < world; ++r) {
    std::copy_n(all.begin() + r * most * h, (share(r + 1) - share(r)) * h, out + share(r) * h);
  }
}

void MoeLayer::forward_own(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  const int64_t k = config_.router.top_k;
  const int64_t num_experts = config_.router.num_experts;
  const int64_t h = config_.hidden;
  const int64_t world = comm_->world_size();
  const int64_t slots = placement_.num_physical();
  const int64_t per_rank = slots / world;

  // Route, and record which experts this rank's tokens chose.
  std::vector<int32_t> chosen(static_cast<size_t>(tokens * k));
  std::vector<float> weight(chosen.size());
  router_.route(x, tokens, chosen.data(), weight.data(), pool);
  for (int32_t e : chosen) {
    ++load_[static_cast<size_t>(e)];
    ++pending_load_[static_cast<size_t>(e)];
  }

  // Capacity and replica turns are counted over the expert group's tokens in one global
  // order, so they need the other ranks' counts per (slot, expert): every rank then drops
  // and places exactly what one process holding all the tokens would.
  std::vector<int64_t> ahead(static_cast<size_t>(k * num_experts), 0);
  std::vector<int64_t> totals(static_cast<size_t>(num_experts), 0);  // the group's, per expert
  int64_t group_tokens = tokens;
  if (config_.capacity_factor || replicated_) {
    std::vector<int64_t> mine(ahead.size(), 0);
    for (int64_t a = 0; a < tokens * k; ++a)
      ++mine[static_cast<size_t>((a % k) * num_experts + chosen[a])];
    const std::vector<int64_t> all = world > 1 ? comm_->all_gather<int64_t>(mine) : mine;
    group_tokens = 0;
    for (int64_t r = 0; r < world; ++r) {
      for (size_t i = 0; i < mine.size(); ++i) {
        const int64_t n = all[static_cast<size_t>(r) * mine.size() + i];
        group_tokens += n;
        totals[i % static_cast<size_t>(num_experts)] += n;
        const auto s = static_cast<int64_t>(i) / num_experts;
        const int64_t e = static_cast<int64_t>(i) % num_experts;
        // Ahead of this rank's slot s: the other ranks' earlier slots and, at slot s, the
        // ranks before this one (assign_targets counts this rank's own).
        if (r == comm_->rank()) continue;
        for (int64_t later = s + 1; later < k; ++later) {
          ahead[static_cast<size_t>(later * num_experts + e)] += n;
        }
        if (r < comm_->rank()) ahead[i] += n;
      }
    }
    group_tokens /= k;
  }
  std::optional<int64_t> capacity;
  if (config_.capacity_factor) {
    capacity = expert_capacity(*config_.capacity_factor, group_tokens, k, num_experts);
    uint64_t group_dropped = 0;  // the same on every rank
    for (const int64_t n : totals) {
      group_dropped += static_cast<uint64_t>(std::max<int64_t>(0, n - *capacity));
    }
    dropped_ += group_dropped;
    if (eplb_) eplb_->add_dropped(group_dropped);
  }
  int64_t dropped_here = 0;
  const std::vector<int32_t> targets = assign_targets(chosen.data(), tokens, k, num_experts, ahead,
                                                      capacity, replicas_, dropped_here);
  const DispatchPlan plan = group_by_target(targets.data(), tokens, k, slots);

  // Dispatch: rows grouped by physical slot are grouped by destination rank too.
  const auto kept = static_cast<int64_t>(plan.order.size());
  // Activation-sized buffers (a 512-token DeepSeek-V2-Lite step: 25 MB each) from the scratch
  // cache: as std::vectors every layer page-faulted and zeroed them afresh.
  auto send = ScratchFloats::uninitialized(static_cast<size_t>(kept * h));
  pool.parallel_for(kept, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t token = plan.order[static_cast<size_t>(i)] / k;
      std::memcpy(send.data() + i * h, x + token * h, static_cast<size_t>(h) * sizeof(float));
    }
  });
  std::vector<int64_t> slot_counts(static_cast<size_t>(slots));
  std::vector<int64_t> rank_values(static_cast<size_t>(world));
  for (int64_t p = 0; p < slots; ++p) {
    slot_counts[static_cast<size_t>(p)] = plan.expert_offsets[static_cast<size_t>(p + 1)] -
                                          plan.expert_offsets[static_cast<size_t>(p)];
    rank_values[static_cast<size_t>(p / per_rank)] += slot_counts[static_cast<size_t>(p)] * h;
    pending_rank_rows_[static_cast<size_t>(p / per_rank)] +=
        static_cast<uint64_t>(slot_counts[static_cast<size_t>(p)]);
  }
  const std::vector<int64_t> per_rank_counts(static_cast<size_t>(world), per_rank);
  std::vector<int64_t> recv_counts, ignored, recv_values;
  comm_->all_to_all_v<int64_t>(slot_counts, per_rank_counts, recv_counts, ignored);
  std::vector<float> recv;
  const float* rows = exchange_rows(send, rank_values, recv, recv_values, pool);

  // Experts, then the rows go back to the ranks that sent them, in the order they came.
  int64_t received = 0;
  for (const int64_t n : recv_counts) received += n;
  ScratchFloats computed(static_cast<size_t>(received * h));
  if (packed_.defined()) {
    packed_.run(rows, recv_counts, world, computed.data(), pool);
  } else {
    run_experts(experts_, rows, recv_counts, world, computed.data(), pool);
  }
  std::vector<float> back_rows;
  std::vector<int64_t> back_values;
  const float* back = exchange_rows(computed, recv_values, back_rows, back_values, pool);
  DI_CHECK(back_values == rank_values,
           "MoE combine: ranks returned a different number of rows "
           "than were dispatched to them");

  // Combine in each token's slot order: batch-invariant and thread-count invariant.
  pool.parallel_for(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = out + t * h;
      std::fill_n(o, h, 0.0f);
      for (int64_t s = 0; s < k; ++s) {
        const int32_t row = plan.position[static_cast<size_t>(t * k + s)];
        if (row < 0) continue;  // dropped by capacity
        const float w = weight[static_cast<size_t>(t * k + s)];
        const float* y = back + static_cast<int64_t>(row) * h;
        for (int64_t c = 0; c < h; ++c) o[c] += w * y[c];
      }
    }
  });
  if (shared_ && tokens > 0) {
    auto shared_out = ScratchFloats::uninitialized(static_cast<size_t>(tokens * h));
    shared_->forward(x, tokens, shared_out.data(), pool);
    kernels::add(out, shared_out.data(), out, tokens * h);
  }
}

}  // namespace deepinfer::model
