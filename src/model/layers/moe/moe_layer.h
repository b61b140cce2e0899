#pragma once
// Mixture-of-Experts feed-forward (Qwen3-MoE, GLM-4.5, DeepSeek-V2/V3), written for expert
// parallelism from the start:
//   route    MoeRouter: f32 logits, softmax|sigmoid, greedy|group_limited_greedy|noaux_tc
//   group    plan_dispatch: counting sort of (token, slot) assignments by expert
//            (+ optional capacity drop)
//   dispatch Communicator::all_to_all_v: expert e lives on rank e / experts_per_rank; rows
//            travel to their expert's rank (a copy at world size 1)
//   experts  ExpertStack: one GEMM per projection per expert over its whole token group
//   combine  rows come back by the reverse all_to_all_v; each token sums weight x output
//            over its top-k slots in slot order (so a token's result never depends on the
//            rest of the batch), then adds the shared experts' output.
// routed_scaling_factor scales the routed weights (inside the router), never the shared
// experts, as transformers does.
//
// Usage (an arch file's feed-forward factory for layer i, prefix "model.layers.i"):
//   MoeConfig moe;
//   moe.hidden = config.hidden_size;
//   moe.intermediate = moe_intermediate_size;
//   moe.router = {.num_experts = n_routed_experts, .top_k = num_experts_per_tok,
//                 .scoring = RouterScoring::sigmoid, .method = TopkMethod::noaux_tc,
//                 .n_group = n_group, .topk_group = topk_group, .norm_topk_prob = true,
//                 .norm_eps = 1e-20f, .routed_scaling_factor = routed_scaling_factor};
//   moe.shared_intermediate = moe_intermediate_size * n_shared_experts;  // 0: none
//   return MoeLayer::load(weights, prefix + ".mlp", moe, comm);
// with `comm` one std::shared_ptr<parallel::Communicator> shared by all layers
// (std::make_shared<parallel::SingleProcessCommunicator>() for one process).
// Tensors read under the prefix: gate.weight [E, hidden], gate.e_score_correction_bias [E]
// (noaux_tc), experts.{e}.{gate,up,down}_proj.weight (or fused experts.gate_up_proj /
// experts.down_proj), shared_experts.{gate,up,down}_proj.weight (when shared_intermediate > 0).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/layers/feed_forward.h"
#include "model/layers/moe/expert_stack.h"
#include "model/layers/moe/router.h"
#include "model/weights.h"
#include "parallel/communicator.h"

namespace deepinfer::model {

struct MoeConfig {
  int64_t hidden = 0;
  int64_t intermediate = 0;  // per routed expert (moe_intermediate_size)
  RouterConfig router;
  int64_t shared_intermediate = 0;  // all shared experts as one MLP; 0 = no shared experts
  // ep_config capacity_factor: at most ceil(cf x tokens x top_k / experts) assignments per
  // expert per forward call, counted over this rank's tokens before dispatch (see
  // plan_dispatch for which are dropped). Off by default: exact transformers semantics and
  // batch invariance need every assignment kept.
  std::optional<double> capacity_factor;
  // Every rank of the expert group runs the same tokens (attention replicated, as at this
  // milestone of expert parallelism): rank r then routes and dispatches only its share of
  // them (tokens [T r / W, T (r + 1) / W)), so each expert computes each token once, and the
  // ranks all-gather the outputs. Off: each rank's tokens are its own (the MoE unit tests,
  // later attention data parallelism). The result is the same either way, bit for bit.
  bool replicated_tokens = false;
};

class MoeLayer : public FeedForward {
 public:
  static std::unique_ptr<MoeLayer> load(WeightLoader& weights, const std::string& prefix,
                                        const MoeConfig& config,
                                        std::shared_ptr<parallel::Communicator> comm);
  // From parts in hand; `experts` must hold this rank's experts, `shared` may be null.
  // `moe_tensor` (null or size 1: none): the group each expert's intermediate (and the shared
  // experts') is split over; `experts` and `shared` then hold this rank's part and the layer
  // sums the partial outputs over it once, at the end.
  MoeLayer(MoeConfig config, MoeRouter router, ExpertStack experts,
           std::unique_ptr<FeedForward> shared, std::shared_ptr<parallel::Communicator> comm,
           std::shared_ptr<parallel::Communicator> moe_tensor = nullptr);

  // x [tokens, hidden] -> out [tokens, hidden]. Not reentrant (updates the load counters).
  void forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const override;

  const MoeConfig& config() const { return config_; }
  void set_capacity_factor(std::optional<double> capacity_factor);
  int64_t first_local_expert() const { return first_local_; }
  int64_t local_experts() const { return experts_.count(); }

  // Load statistics since construction / the last reset: per (global) expert, how many of
  // this rank's token assignments (with replicated_tokens: of its share) the router sent to it
  // (before any capacity drop; they sum to tokens x top_k over all forward calls), and how many
  // assignments capacity dropped.
  std::span<const uint64_t> expert_load() const override { return load_; }
  uint64_t dropped_assignments() const { return dropped_; }
  void reset_load_stats() override;

 private:
  // Every token of the call (split among the expert token peers when replicated), before the
  // moe tensor reduce.
  void forward_tokens(const float* x, int64_t tokens, float* out, ThreadPool& pool) const;
  // route -> dispatch -> experts -> combine (+ shared experts) of this rank's own tokens.
  void forward_own(const float* x, int64_t tokens, float* out, ThreadPool& pool) const;

  MoeConfig config_;
  MoeRouter router_;
  ExpertStack experts_;
  std::unique_ptr<FeedForward> shared_;
  std::shared_ptr<parallel::Communicator> comm_;
  std::shared_ptr<parallel::Communicator> moe_tensor_;  // null: experts unsplit
  int64_t first_local_ = 0;
  // Statistics are observations, not state of the computation: forward stays logically const.
  mutable std::vector<uint64_t> load_;
  mutable uint64_t dropped_ = 0;
};

}  // namespace deepinfer::model
