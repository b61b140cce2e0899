#include "parallel/parallel_context.h"

#include "core/error.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::parallel {

std::shared_ptr<ParallelContext> ParallelContext::single_process() {
  std::shared_ptr<ParallelContext> context(new ParallelContext());
  context->world_ = std::make_shared<SingleProcessCommunicator>();
  context->expert_ = context->world_;
  return context;
}

std::shared_ptr<ParallelContext> ParallelContext::from(std::shared_ptr<Communicator> world,
                                                       std::shared_ptr<Communicator> expert) {
  DI_CHECK(world != nullptr && expert != nullptr, "ParallelContext: missing communicator");
  std::shared_ptr<ParallelContext> context(new ParallelContext());
  context->rank_ = world->rank();
  context->world_size_ = world->world_size();
  context->world_ = std::move(world);
  context->expert_ = std::move(expert);
  return context;
}

std::shared_ptr<ParallelContext> ParallelContext::create(const ParallelRequest& request) {
  const int64_t ep = request.expert_parallel_size;
  DI_CHECK(ep >= 1, request.origin, " = ", ep, ": must be at least 1");
  const int launched = launcher_world_size();
  if (launched == 1) {
    DI_CHECK(ep == 1, request.origin, " = ", ep, " needs ", ep,
             " processes, one per expert-parallel rank, and this one was not started by "
             "mpirun: launch it as `mpirun -np ",
             ep, " deepinfer ...` (docs/DISTRIBUTED.md)");
    return single_process();
  }
  // Checked before MPI starts, from mpirun's environment: every rank refuses alike.
  DI_CHECK(ep == launched, request.origin, " = ", ep, " but mpirun started ", launched,
           " ranks: the expert-parallel size must equal the number of ranks (mpirun -np ", ep,
           "), or give --enable-expert-parallel for expert parallelism over all ranks");
  mpi_init();
  std::shared_ptr<ParallelContext> context(new ParallelContext());
  context->mpi_world_ = MpiCommunicator::world();
  context->rank_ = context->mpi_world_->rank();
  context->world_size_ = context->mpi_world_->world_size();
  DI_CHECK(context->world_size_ == launched, "MPI reports ", context->world_size_,
           " ranks but the launcher's environment says ", launched);
  context->world_ = context->mpi_world_;
  // One expert group over the whole world: its own communicator, so expert collectives
  // never match the lockstep broadcasts of the world.
  context->expert_ = context->mpi_world_->split(0, context->rank_);
  return context;
}

std::string ParallelContext::describe() const {
  if (!distributed()) return "one process";
  return str_cat("rank ", rank_, " of ", world_size_);
}

}  // namespace deepinfer::parallel
