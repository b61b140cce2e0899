#pragma once
// The parallel layout of one process, made once at start-up from the flags / recipe and
// handed to model loading (model::LoadOptions): world rank and size, and the communicator of
// each group. At this milestone the one group is the expert group, which spans the world
// (attention, dense layers and lm_head are replicated on every rank; routed experts are
// split). Tensor and pipeline groups come later.
//
// World size 1 is not a special path, it is this context with SingleProcessCommunicators:
// it never touches MPI. MPI is initialised only when the process was started by mpirun
// (docs/DISTRIBUTED.md).
#include <cstdint>
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace deepinfer::parallel {

class MpiCommunicator;

struct ParallelRequest {
  int64_t expert_parallel_size = 1;
  std::string origin = "--expert-parallel-size";  // where it was asked for, for messages
};

class ParallelContext {
 public:
  // World size 1, no MPI.
  static std::shared_ptr<ParallelContext> single_process();
  // From the launcher: one process without mpirun, else the MPI world (mpi_init). Refuses,
  // naming the numbers, an expert-parallel size other than the world size, and a size > 1
  // without mpirun (saying how to launch).
  static std::shared_ptr<ParallelContext> create(const ParallelRequest& request);
  // From communicators in hand (tests; other transports): `expert` groups ranks of `world`.
  static std::shared_ptr<ParallelContext> from(std::shared_ptr<Communicator> world,
                                               std::shared_ptr<Communicator> expert);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool distributed() const { return world_size_ > 1; }
  // Rank 0 drives (tokenizer, engine, scheduler); the others follow in lockstep.
  bool is_driver() const { return rank_ == 0; }
  int64_t expert_parallel_size() const { return expert_->world_size(); }
  // Every rank of the expert group runs the same batch: true whenever there are several
  // ranks, as long as attention is replicated (no attention data parallelism yet).
  bool expert_tokens_replicated() const { return distributed(); }

  const std::shared_ptr<Communicator>& world() const { return world_; }
  const std::shared_ptr<Communicator>& expert_group() const { return expert_; }
  // The world as MPI (null for one process): the lockstep worker's idle wait needs it.
  const std::shared_ptr<MpiCommunicator>& mpi_world() const { return mpi_world_; }

  // "rank 1 of 2" / "one process", for logs.
  std::string describe() const;

 private:
  ParallelContext() = default;
  int rank_ = 0;
  int world_size_ = 1;
  std::shared_ptr<Communicator> world_;
  std::shared_ptr<Communicator> expert_;
  std::shared_ptr<MpiCommunicator> mpi_world_;
};

}  // namespace deepinfer::parallel
