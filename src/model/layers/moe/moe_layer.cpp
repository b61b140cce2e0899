#include "model/layers/moe/moe_layer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
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
  const int64_t per_rank = experts.count();
  const int64_t h = experts.hidden();
  std::vector<int64_t> offset(counts.size());  // first row of block (s, j)
  int64_t next = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    offset[b] = next;
    next += counts[b];
  }
  std::vector<float> gathered, result;
  for (int64_t j = 0; j < per_rank; ++j) {
    int64_t total = 0, blocks = 0, only = 0;
    for (int64_t s = 0; s < sources; ++s) {
      const auto b = static_cast<size_t>(s * per_rank + j);
      total += counts[b];
      if (counts[b] > 0) {
        ++blocks;
        only = static_cast<int64_t>(b);
      }
    }
    if (total == 0) continue;
    if (blocks == 1) {  // always so at world size 1: run in place
      const int64_t row = offset[static_cast<size_t>(only)];
      experts.forward(j, rows + row * h, total, out + row * h, pool);
      continue;
    }
    gathered.resize(static_cast<size_t>(total * h));
    result.resize(gathered.size());
    int64_t at = 0;
    for (int64_t s = 0; s < sources; ++s) {
      const auto b = static_cast<size_t>(s * per_rank + j);
      std::copy_n(rows + offset[b] * h, counts[b] * h, gathered.begin() + at * h);
      at += counts[b];
    }
    experts.forward(j, gathered.data(), total, result.data(), pool);
    at = 0;
    for (int64_t s = 0; s < sources; ++s) {
      const auto b = static_cast<size_t>(s * per_rank + j);
      std::copy_n(result.begin() + at * h, counts[b] * h, out + offset[b] * h);
      at += counts[b];
    }
  }
}

}  // namespace

MoeLayer::MoeLayer(MoeConfig config, MoeRouter router, ExpertStack experts,
                   std::unique_ptr<FeedForward> shared,
                   std::shared_ptr<parallel::Communicator> comm,
                   std::shared_ptr<parallel::Communicator> moe_tensor)
    : config_(std::move(config)),
      router_(std::move(router)),
      experts_(std::move(experts)),
      shared_(std::move(shared)),
      comm_(std::move(comm)),
      moe_tensor_(moe_tensor && moe_tensor->world_size() > 1 ? std::move(moe_tensor) : nullptr) {
  DI_CHECK(comm_ != nullptr, "MoE layer: no communicator (use SingleProcessCommunicator)");
  config_.router.validate("MoE layer");
  const int64_t per_rank = experts_per_rank(config_, *comm_, "MoE layer");
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
}

std::unique_ptr<MoeLayer> MoeLayer::load(WeightLoader& weights, const std::string& prefix,
                                         const MoeConfig& config,
                                         std::shared_ptr<parallel::Communicator> comm) {
  DI_CHECK(comm != nullptr, prefix, ": MoE layer needs a communicator");
  DI_CHECK(config.hidden > 0 && config.intermediate > 0, prefix,
           ": MoE hidden and moe_intermediate_size must be positive");
  const int64_t per_rank = experts_per_rank(config, *comm, prefix);
  MoeRouter router = MoeRouter::load(weights, prefix + ".gate", config.hidden, config.router);
  // Moe tensor parallelism: every expert (and the shared experts) split over the group, the
  // partial outputs summed once at the end of forward.
  auto moe_tensor = weights.moe_tensor_group();
  TensorSplit split = TensorSplit::over(moe_tensor);
  split.reduce = nullptr;
  ExpertStack experts = ExpertStack::load(weights, prefix + ".experts", config.router.num_experts,
                                          comm->rank() * per_rank, per_rank, config.hidden,
                                          config.intermediate, split);
  std::unique_ptr<FeedForward> shared;
  if (config.shared_intermediate > 0) {
    shared = GatedMlp::load(weights, prefix + ".shared_experts", config.hidden,
                            config.shared_intermediate, false, split);
  }
  MoeConfig layer_config = config;
  layer_config.replicated_tokens = config.replicated_tokens || weights.expert_tokens_replicated();
  return std::make_unique<MoeLayer>(std::move(layer_config), std::move(router), std::move(experts),
                                    std::move(shared), std::move(comm), std::move(moe_tensor));
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
  forward_tokens(x, tokens, out, pool);
  // Combine and shared experts are linear in the shards: one sum gives the whole output.
  if (moe_tensor_)
    moe_tensor_->all_reduce_sum(
        std::span<float>(out, static_cast<size_t>(tokens * config_.hidden)));
}

void MoeLayer::forward_tokens(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  const int64_t world = comm_->world_size();
  if (!config_.replicated_tokens || world == 1) {
    forward_own(x, tokens, out, pool);
    return;
  }
  // Each token's result depends on that token alone (batch-invariant kernels, combine in
  // slot order), so splitting the batch over the ranks changes no bit of it.
  const int64_t h = config_.hidden;
  const auto share = [&](int64_t r) { return tokens * r / world; };
  const int64_t begin = share(comm_->rank());
  const int64_t mine = share(comm_->rank() + 1) - begin;
  const int64_t most = (tokens + world - 1) / world;
  std::vector<float> padded(static_cast<size_t>(most * h));
  forward_own(x + begin * h, mine, padded.data(), pool);
  const std::vector<float> all = comm_->all_gather<float>(padded);
  for (int64_t r = 0; r < world; ++r) {
    std::copy_n(all.begin() + r * most * h, (share(r + 1) - share(r)) * h, out + share(r) * h);
  }
}

void MoeLayer::forward_own(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  const int64_t k = config_.router.top_k;
  const int64_t num_experts = config_.router.num_experts;
  const int64_t h = config_.hidden;
  const int64_t world = comm_->world_size();
  const int64_t per_rank = num_experts / world;

  // Route, and record which experts this rank's tokens chose.
  std::vector<int32_t> chosen(static_cast<size_t>(tokens * k));
  std::vector<float> weight(chosen.size());
  router_.route(x, tokens, chosen.data(), weight.data(), pool);
  for (int32_t e : chosen) ++load_[static_cast<size_t>(e)];
  std::optional<int64_t> capacity;
  if (config_.capacity_factor) {
    capacity = expert_capacity(*config_.capacity_factor, tokens, k, num_experts);
  }
  const DispatchPlan plan = plan_dispatch(chosen.data(), tokens, k, num_experts, capacity);
  dropped_ += static_cast<uint64_t>(plan.dropped);

  // Dispatch: rows grouped by expert are grouped by destination rank too.
  const auto kept = static_cast<int64_t>(plan.order.size());
  std::vector<float> send(static_cast<size_t>(kept * h));
  pool.parallel_for(kept, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t token = plan.order[static_cast<size_t>(i)] / k;
      std::memcpy(send.data() + i * h, x + token * h, static_cast<size_t>(h) * sizeof(float));
    }
  });
  std::vector<int64_t> expert_counts(static_cast<size_t>(num_experts));
  std::vector<int64_t> rank_values(static_cast<size_t>(world));
  for (int64_t e = 0; e < num_experts; ++e) {
    expert_counts[static_cast<size_t>(e)] = plan.expert_offsets[static_cast<size_t>(e + 1)] -
                                            plan.expert_offsets[static_cast<size_t>(e)];
    rank_values[static_cast<size_t>(e / per_rank)] += expert_counts[static_cast<size_t>(e)] * h;
  }
  const std::vector<int64_t> per_rank_counts(static_cast<size_t>(world), per_rank);
  std::vector<int64_t> recv_counts, ignored, recv_values;
  comm_->all_to_all_v<int64_t>(expert_counts, per_rank_counts, recv_counts, ignored);
  std::vector<float> recv;
  comm_->all_to_all_v<float>(send, rank_values, recv, recv_values);

  // Experts, then the rows go back to the ranks that sent them, in the order they came.
  std::vector<float> computed(recv.size());
  run_experts(experts_, recv.data(), recv_counts, world, computed.data(), pool);
  std::vector<float> back;
  std::vector<int64_t> back_values;
  comm_->all_to_all_v<float>(computed, recv_values, back, back_values);
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
        const float* y = back.data() + static_cast<int64_t>(row) * h;
        for (int64_t c = 0; c < h; ++c) o[c] += w * y[c];
      }
    }
  });
  if (shared_ && tokens > 0) {
    std::vector<float> shared_out(static_cast<size_t>(tokens * h));
    shared_->forward(x, tokens, shared_out.data(), pool);
    kernels::add(out, shared_out.data(), out, tokens * h);
  }
}

}  // namespace deepinfer::model
