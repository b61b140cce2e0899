#pragma once
// The parallel layout of one process, made once at start-up from the flags / recipe and
// handed to model loading (model::LoadOptions): world rank and size, and the communicator of
// each group.
//
// The layout (docs/DISTRIBUTED.md, "Layout"). The world of W ranks is pp pipeline stages of
// S = W / pp ranks each; stage s holds ranks [s S, (s + 1) S). A rank's index in its stage is
// i = a tp + t: t its tensor-parallel index, a its attention group (S / tp groups per stage).
//   tensor      the tp ranks of one attention group: attention and dense layers split
//               column / row wise, all-reduced after o_proj and down_proj.
//   pipeline    the pp ranks with the same index i, one per stage: hidden states travel
//               stage to stage by send / recv.
//   attention   the S / tp ranks of a stage with the same t, one per attention group. With
//   data        attention data parallelism (data_parallel_size = S / tp > 1) each attention
//               group holds its own sequences and their KV cache; without it (1) the attention
//               groups are replicas that run the same batch (only expert parallelism spans
//               them).
//   expert      the ep ranks of a stage with the same c = i % moe_tp, where moe_tp = S / ep:
//               routed experts are split over them; tokens travel by all-to-all.
//   moe tensor  the moe_tp ranks [j moe_tp, (j + 1) moe_tp) of a stage: each expert's
//               intermediate is split over them and their outputs are all-reduced.
//   expert token peers  the ranks of my expert group that hold the same tokens as I do (the
//               whole expert group without attention data parallelism; those in my attention
//               group with it): the MoE layer splits these tokens among them, so each expert
//               computes each token once, and all-gathers the outputs.
// Rules (checked, each refusal names the numbers): pp divides W; tp and ep divide S; with
// attention data parallelism tp x dp = S and moe_tp divides tp (the ranks sharing an
// expert's shards hold the same tokens); without it tp = S or ep = S (any other rank would
// be an idle replica). Global rank 0 drives (tokenizer, engine, scheduler).
//
// World size 1 is not a special path, it is this context with SingleProcessCommunicators:
// it never touches MPI. MPI is initialised only when the process was started by mpirun
// (docs/DISTRIBUTED.md).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace deepinfer::parallel {

class MpiCommunicator;

// A group size as asked for, with where it was asked (for messages).
struct GroupSize {
  int64_t size = 1;
  std::string origin;
};

struct ParallelRequest {
  GroupSize tensor{1, "--tensor-parallel-size"};
  GroupSize pipeline{1, "--pipeline-parallel-size"};
  GroupSize expert{1, "--expert-parallel-size"};
  // Attention data parallelism: attention groups per stage with their own sequences. 1: the
  // attention groups (if several) run the same batch.
  GroupSize data{1, "--data-parallel-size"};
};

// "--tensor-parallel-size = 2, --expert-parallel-size = 2": the sizes other than 1, for
// messages ("one process" when none).
std::string describe_request(const ParallelRequest& request);

// The sizes of a layout, checked against each other and the world (no MPI involved).
struct ParallelSizes {
  int64_t world = 1;
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t data = 1;        // attention data parallel groups per stage (1: none)
  int64_t expert = 1;      // expert-parallel ranks per stage
  int64_t stage = 1;       // ranks per pipeline stage: world / pipeline
  int64_t moe_tensor = 1;  // stage / expert

  // Refuses (Error naming the numbers) a request that does not fit a world of `world` ranks.
  static ParallelSizes resolve(const ParallelRequest& request, int64_t world);
  // The world a request needs: pipeline x max(tensor x data, expert).
  static int64_t world_for(const ParallelRequest& request);
};

// Where one rank sits in a layout (pure arithmetic, shared by the context and tests).
struct RankCoordinates {
  int64_t stage = 0;  // pipeline stage
  int64_t index = 0;  // index within the stage: attention_group * tensor + tensor_rank
  int64_t tensor_rank = 0;
  int64_t attention_group = 0;
  int64_t expert_rank = 0;      // index / moe_tensor
  int64_t moe_tensor_rank = 0;  // index % moe_tensor

  static RankCoordinates of(const ParallelSizes& sizes, int64_t rank);
};

class ParallelContext {
 public:
  // World size 1, no MPI.
  static std::shared_ptr<ParallelContext> single_process();
  // From the launcher: one process without mpirun, else the MPI world (mpi_init). Refuses,
  // naming the numbers, a layout that does not fit the world, and a size > 1 without mpirun
  // (saying how to launch).
  static std::shared_ptr<ParallelContext> create(const ParallelRequest& request);
  // From communicators in hand (tests; other transports): only an expert group, every other
  // group is this rank alone (the layout of expert parallelism over `expert`).
  static std::shared_ptr<ParallelContext> from(std::shared_ptr<Communicator> world,
                                               std::shared_ptr<Communicator> expert);
  // The layout `sizes` over `world` (any transport: MPI, or the threads of a unit test),
  // every group split from it. Collective over `world`.
  static std::shared_ptr<ParallelContext> build(const ParallelSizes& sizes,
                                                std::shared_ptr<Communicator> world);
  // Rank `rank` of the layout `sizes` without communicating: each group (the world included) is
  // `group(rank in the group, group size)`, the same ranks and sizes build() gives (deepinfer
  // convert loads each rank's weights this way: model loading never communicates).
  using GroupMaker = std::function<std::shared_ptr<Communicator>(int rank, int size)>;
  static std::shared_ptr<ParallelContext> offline(const ParallelSizes& sizes, int64_t rank,
                                                  const GroupMaker& group);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool distributed() const { return world_size_ > 1; }
  // Rank 0 drives (tokenizer, engine, scheduler); the others follow in lockstep.
  bool is_driver() const { return rank_ == 0; }
  const ParallelSizes& sizes() const { return sizes_; }
  const RankCoordinates& coordinates() const { return coordinates_; }

  int64_t tensor_parallel_size() const { return sizes_.tensor; }
  int64_t pipeline_parallel_size() const { return sizes_.pipeline; }
  int64_t data_parallel_size() const { return sizes_.data; }
  int64_t expert_parallel_size() const { return sizes_.expert; }
  int64_t moe_tensor_parallel_size() const { return sizes_.moe_tensor; }
  int64_t pipeline_stage() const { return coordinates_.stage; }
  bool first_stage() const { return coordinates_.stage == 0; }
  bool last_stage() const { return coordinates_.stage == sizes_.pipeline - 1; }
  // Attention data parallelism: this rank's attention group has its own sequences.
  bool attention_data_parallel() const { return sizes_.data > 1; }
  // The MoE layer splits its tokens among the expert token peers (more than this rank).
  bool expert_tokens_replicated() const { return expert_token_peers_->world_size() > 1; }

  const std::shared_ptr<Communicator>& world() const { return world_; }
  const std::shared_ptr<Communicator>& tensor_group() const { return tensor_; }
  const std::shared_ptr<Communicator>& pipeline_group() const { return pipeline_; }
  const std::shared_ptr<Communicator>& attention_data_group() const { return attention_data_; }
  const std::shared_ptr<Communicator>& expert_group() const { return expert_; }
  const std::shared_ptr<Communicator>& moe_tensor_group() const { return moe_tensor_; }
  const std::shared_ptr<Communicator>& expert_token_peers() const { return expert_token_peers_; }
  // The world as MPI (null for one process): the lockstep worker's idle wait needs it.
  const std::shared_ptr<MpiCommunicator>& mpi_world() const { return mpi_world_; }

  // "rank 1 of 2 (tp 1/2, ep 1/2)" / "one process", for logs.
  std::string describe() const;

 private:
  ParallelContext() = default;
  void set_single_groups();  // every group is this rank alone

  int rank_ = 0;
  int world_size_ = 1;
  ParallelSizes sizes_;
  RankCoordinates coordinates_;
  std::shared_ptr<Communicator> world_;
  std::shared_ptr<Communicator> tensor_;
  std::shared_ptr<Communicator> pipeline_;
  std::shared_ptr<Communicator> attention_data_;
  std::shared_ptr<Communicator> expert_;
  std::shared_ptr<Communicator> moe_tensor_;
  std::shared_ptr<Communicator> expert_token_peers_;
  std::shared_ptr<MpiCommunicator> mpi_world_;
};

}  // namespace deepinfer::parallel
