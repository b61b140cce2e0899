#pragma once
// Mixture-of-Experts feed-forward (Qwen3-MoE, GLM-4.5, DeepSeek-V2/V3), written for expert
// parallelism from the start:
//   route    MoeRouter: f32 logits, softmax|sigmoid, greedy|group_limited_greedy|noaux_tc
//   group    assign_targets + group_by_target: each (token, slot) assignment goes to a
//            physical expert slot (capacity drop and replica turns counted in one global
//            order over the expert group), then a counting sort by slot
//   dispatch Communicator::all_to_all_v: slot p lives on rank p / slots_per_rank (without
//            EPLB slot e holds expert e); rows travel to their slot's rank (at world size 1
//            they stay where they are), in f32 or the communication dtype
//   balance  EPLB (moe_eplb.cpp): at sync points the ranks sum the expert load of a window
//            and may re-place experts, moving their weights
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
// experts.down_proj), shared_experts.{gate,up,down}_proj.weight (when shared_intermediate > 0);
// MoeConfig::names renames them (MiniMax-M2's Mixtral-style names).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/layers/feed_forward.h"
#include "model/layers/moe/expert_stack.h"
#include "model/layers/moe/packed_experts.h"
#include "model/layers/moe/router.h"
#include "model/weights.h"
#include "parallel/communicator.h"
#include "parallel/eplb.h"
#include "parallel/eplb_state.h"
#include "parallel/moe_options.h"

namespace deepinfer::model {

// A checkpoint's names of one MoE layer's tensors, under MoeLayer::load's prefix. The
// defaults are transformers' (Qwen3-MoE, GLM-4.5, DeepSeek).
struct MoeTensorNames {
  std::string router = "gate";                                   // <router>.weight
  std::string correction_bias = "gate.e_score_correction_bias";  // noaux_tc
  std::string experts = "experts";
  ExpertNames expert;  // each expert's projections
  // MiniMax-M2 (and Mixtral): gate.weight, e_score_correction_bias beside it, experts.{e}.w1 /
  // w3 / w2 (under the prefix block_sparse_moe).
  static MoeTensorNames mixtral() {
    return {"gate", "e_score_correction_bias", "experts", ExpertNames::mixtral()};
  }
};

struct MoeConfig {
  int64_t hidden = 0;
  int64_t intermediate = 0;  // per routed expert (moe_intermediate_size)
  RouterConfig router;
  int64_t shared_intermediate = 0;  // all shared experts as one MLP; 0 = no shared experts
  // ep_config capacity_factor: at most ceil(cf x tokens x top_k / experts) assignments per
  // expert per forward call, tokens counted over the whole expert group (every rank's share),
  // dropped in one global order whatever the number of ranks (assign_targets). Off by
  // default: exact transformers semantics and batch invariance need every assignment kept.
  std::optional<double> capacity_factor;
  // The rows the dispatch and combine all-to-alls carry (with more than one rank): f32 is
  // exact; bf16 / f16 round each row element once each way.
  parallel::CommunicationDType communication_dtype = parallel::CommunicationDType::f32;
  // Every rank of the expert group runs the same tokens (attention replicated, as at this
  // milestone of expert parallelism): rank r then routes and dispatches only its share of
  // them (tokens [T r / W, T (r + 1) / W)), so each expert computes each token once, and the
  // ranks all-gather the outputs. Off: each rank's tokens are its own (the MoE unit tests,
  // later attention data parallelism). The result is the same either way, bit for bit.
  bool replicated_tokens = false;
  // enable_atb_moe: f32 / bf16 routed experts run as one grouped job on packed panels
  // (packed_experts.h); false, or other weight types: ExpertStack::forward per expert.
  bool fused_experts = true;
  // Repacked block stacks (ExpertStack::repack_blocks) on huge pages (core/huge_page_arena.h;
  // MemoryOptions::huge_pages, set by load()).
  bool huge_pages = false;
  MoeTensorNames names;  // the tensors load() reads
};

class MoeLayer : public FeedForward {
 public:
  static std::unique_ptr<MoeLayer> load(WeightLoader& weights, const std::string& prefix,
                                        const MoeConfig& config,
                                        std::shared_ptr<parallel::Communicator> comm);
  // From parts in hand; `experts` must hold this rank's experts, `shared` may be null.
  // `eplb` (may be null: no load balancing) is shared by the model's MoE layers; `placement`
  // (empty: expert e in slot e) says which logical expert each physical slot holds, slots
  // [r S, (r + 1) S) on rank r, and `experts` holds this rank's slots in order.
  // `token_peers`: with replicated_tokens, the ranks of `comm` holding the same tokens as this
  // one, which split them (null: all of `comm`, as without attention data parallelism).
  // `moe_tensor` (null or size 1: none): the group each expert's intermediate (and the shared
  // experts') is split over; `experts` and `shared` then hold this rank's part and the layer
  // sums the partial outputs over it once, at the end of forward.
  MoeLayer(MoeConfig config, MoeRouter router, ExpertStack experts,
           std::unique_ptr<FeedForward> shared, std::shared_ptr<parallel::Communicator> comm,
           std::shared_ptr<parallel::EplbState> eplb = nullptr, std::string name = "",
           parallel::ExpertPlacement placement = {},
           std::shared_ptr<parallel::Communicator> token_peers = nullptr,
           std::shared_ptr<parallel::Communicator> moe_tensor = nullptr);

  // x [tokens, hidden] -> out [tokens, hidden]. Not reentrant (updates the load counters).
  void forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const override;

  const MoeConfig& config() const { return config_; }
  void set_capacity_factor(std::optional<double> capacity_factor);
  int64_t first_local_expert() const { return first_local_; }
  int64_t local_experts() const { return experts_.count(); }
  // The placement in force (EPLB may change it at its sync points) and this rank's slots.
  const parallel::ExpertPlacement& placement() const { return placement_; }
  std::vector<int64_t> local_expert_ids() const;
  // The placement at start: from the recorded load of this layer, else with redundant slots
  // spread by a uniform load, else expert e in slot e.
  static parallel::ExpertPlacement initial_placement(const MoeConfig& config, int world,
                                                     const parallel::EplbState* eplb,
                                                     const std::string& name);

  // Load statistics since construction / the last reset: per (global) expert, how many of
  // this rank's token assignments (with replicated_tokens: of its share) the router sent to it
  // (before any capacity drop; they sum to tokens x top_k over all forward calls), and how many
  // assignments capacity dropped.
  std::span<const uint64_t> expert_load() const override { return load_; }
  uint64_t dropped_assignments() const { return dropped_; }
  void reset_load_stats() override;

 private:
  // The forward pass proper: with replicated tokens, this rank's share, then the all-gather.
  void forward_shares(const float* x, int64_t tokens, float* out, ThreadPool& pool) const;
  // route -> dispatch -> experts -> combine (+ shared experts) of this rank's own tokens.
  void forward_own(const float* x, int64_t tokens, float* out, ThreadPool& pool) const;
  // all_to_all_v of activation rows in config_.communication_dtype; the rows received. One
  // process: `send` itself (recv_values = send_values), no copy.
  const float* exchange_rows(std::span<const float> send, std::span<const int64_t> send_values,
                             std::vector<float>& recv, std::vector<int64_t>& recv_values,
                             ThreadPool& pool) const;
  // EPLB (moe_eplb.cpp), at the forward calls where every rank of the group is in step:
  // sums the ranks' counters into the window, reports, and re-balances when due.
  void synchronize_load() const;
  void set_placement(parallel::ExpertPlacement placement) const;
  // Moves expert weights so that this rank holds `next`'s slots (an all-to-all of bytes).
  void migrate(const parallel::ExpertPlacement& next) const;
  // packed_ from experts_ (at construction and after a migration), when fused_experts; and
  // experts_' block stacks repacked (ExpertStack::repack_blocks).
  void repack_experts() const;

  MoeConfig config_;
  MoeRouter router_;
  mutable ExpertStack experts_;   // replaced by a migration (EPLB)
  mutable PackedExperts packed_;  // experts_ packed (fused_experts); empty: run experts_
  std::unique_ptr<FeedForward> shared_;
  std::shared_ptr<parallel::Communicator> comm_;
  std::shared_ptr<parallel::Communicator> token_peers_;  // never null
  std::shared_ptr<parallel::Communicator> moe_tensor_;   // null: experts unsplit
  int64_t first_local_ = 0;
  // Statistics are observations, not state of the computation: forward stays logically const.
  mutable std::vector<uint64_t> load_;
  mutable uint64_t dropped_ = 0;
  // EPLB. The placement and the experts it implies change only at sync points, which every
  // rank reaches at the same forward call; no output bit depends on them (each token is
  // computed once by an identical copy of its expert), so forward stays logically const.
  std::shared_ptr<parallel::EplbState> eplb_;
  std::string name_;
  int eplb_layer_ = -1;
  mutable parallel::ExpertPlacement placement_;
  mutable std::vector<std::vector<int64_t>> replicas_;  // logical -> physical slots
  mutable bool replicated_ = false;                     // some expert has several replicas
  mutable int64_t calls_ = 0;
  mutable int64_t rebalances_ = 0;
  // Since the last sync, this rank's share: assignments per logical expert, and kept rows
  // per destination rank. The window holds the group's sums, one bucket per sync interval.
  mutable std::vector<uint64_t> pending_load_;
  mutable std::vector<uint64_t> pending_rank_rows_;
  mutable std::vector<std::vector<uint64_t>> window_;
};

}  // namespace deepinfer::model
