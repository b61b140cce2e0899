#include "parallel/parallel_context.h"

#include <algorithm>

#include "core/error.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::parallel {
namespace {

void check_positive(const GroupSize& size) {
  DI_CHECK(size.size >= 1, size.origin, " = ", size.size, ": must be at least 1");
}

std::string named(const GroupSize& size) {
  return str_cat(size.origin, " = ", size.size);
}

// Splits of the world, in the same order on every rank (MPI_Comm_split is collective).
enum Group : int { kTensor, kPipeline, kAttentionData, kExpert, kMoeTensor, kTokenPeers };

}  // namespace

std::string describe_request(const ParallelRequest& request) {
  std::string asked;
  for (const GroupSize* size :
       {&request.tensor, &request.pipeline, &request.expert, &request.data}) {
    if (size->size != 1) asked += str_cat(asked.empty() ? "" : ", ", named(*size));
  }
  return asked.empty() ? "one process" : asked;
}

int64_t ParallelSizes::world_for(const ParallelRequest& request) {
  return request.pipeline.size *
         std::max(request.tensor.size * request.data.size, request.expert.size);
}

ParallelSizes ParallelSizes::resolve(const ParallelRequest& request, int64_t world) {
  for (const GroupSize* size : {&request.tensor, &request.pipeline, &request.expert, &request.data})
    check_positive(*size);
  ParallelSizes s;
  s.world = world;
  s.tensor = request.tensor.size;
  s.pipeline = request.pipeline.size;
  s.data = request.data.size;
  s.expert = request.expert.size;
  DI_CHECK(world % s.pipeline == 0, named(request.pipeline), " does not divide the ", world,
           " ranks: every pipeline stage needs the same number of ranks");
  s.stage = world / s.pipeline;
  DI_CHECK(s.stage % s.tensor == 0, named(request.tensor), " does not divide the ", s.stage,
           " ranks of a pipeline stage (", world, " ranks / ", s.pipeline, " stages)");
  DI_CHECK(s.stage % s.expert == 0, named(request.expert), " does not divide the ", s.stage,
           " ranks of a pipeline stage (", world, " ranks / ", s.pipeline, " stages)");
  s.moe_tensor = s.stage / s.expert;
  if (s.data > 1) {
    DI_CHECK(s.tensor * s.data == s.stage, named(request.data), " x ", named(request.tensor), " = ",
             s.tensor * s.data, " but a pipeline stage has ", s.stage,
             " ranks: with attention data parallelism they must be equal");
    DI_CHECK(s.tensor % s.moe_tensor == 0,
             "with attention data parallelism the ranks that share "
             "an expert's shards must hold the same tokens: ",
             named(request.expert), " leaves ", s.moe_tensor,
             " ranks per expert, which does not divide ", named(request.tensor));
  } else {
    DI_CHECK(s.tensor == s.stage || s.expert == s.stage, "a pipeline stage has ", s.stage,
             " ranks (", world, " / ", s.pipeline, ") but ", named(request.tensor), " and ",
             named(request.expert),
             " cover neither all of them: the others would only repeat the same work. Give "
             "--tensor-parallel-size or --expert-parallel-size ",
             s.stage, ", or --data-parallel-size ", s.stage / s.tensor,
             " for attention data parallelism");
  }
  return s;
}

RankCoordinates RankCoordinates::of(const ParallelSizes& sizes, int64_t rank) {
  RankCoordinates c;
  c.stage = rank / sizes.stage;
  c.index = rank % sizes.stage;
  c.tensor_rank = c.index % sizes.tensor;
  c.attention_group = c.index / sizes.tensor;
  c.expert_rank = c.index / sizes.moe_tensor;
  c.moe_tensor_rank = c.index % sizes.moe_tensor;
  return c;
}

void ParallelContext::set_single_groups() {
  tensor_ = std::make_shared<SingleProcessCommunicator>();
  pipeline_ = std::make_shared<SingleProcessCommunicator>();
  attention_data_ = std::make_shared<SingleProcessCommunicator>();
  expert_ = std::make_shared<SingleProcessCommunicator>();
  moe_tensor_ = std::make_shared<SingleProcessCommunicator>();
  expert_token_peers_ = std::make_shared<SingleProcessCommunicator>();
}

std::shared_ptr<ParallelContext> ParallelContext::single_process() {
  std::shared_ptr<ParallelContext> context(new ParallelContext());
  context->world_ = std::make_shared<SingleProcessCommunicator>();
  context->set_single_groups();
  return context;
}

std::shared_ptr<ParallelContext> ParallelContext::from(std::shared_ptr<Communicator> world,
                                                       std::shared_ptr<Communicator> expert) {
  DI_CHECK(world != nullptr && expert != nullptr, "ParallelContext: missing communicator");
  std::shared_ptr<ParallelContext> context(new ParallelContext());
  context->rank_ = world->rank();
  context->world_size_ = world->world_size();
  context->set_single_groups();
  context->sizes_.world = context->world_size_;
  context->sizes_.stage = context->world_size_;
  context->sizes_.expert = expert->world_size();
  context->coordinates_.index = context->rank_;
  context->coordinates_.attention_group = context->rank_;
  context->coordinates_.expert_rank = expert->rank();
  context->world_ = std::move(world);
  context->expert_ = expert;
  context->expert_token_peers_ = std::move(expert);  // attention replicated: same tokens
  return context;
}

std::shared_ptr<ParallelContext> ParallelContext::build(const ParallelSizes& sizes,
                                                        std::shared_ptr<Communicator> world) {
  DI_CHECK(world != nullptr && world->world_size() == sizes.world, "ParallelContext: a world of ",
           world ? world->world_size() : 0, " ranks for a layout of ", sizes.world);
  std::shared_ptr<ParallelContext> context(new ParallelContext());
  context->rank_ = world->rank();
  context->world_size_ = world->world_size();
  context->sizes_ = sizes;
  const RankCoordinates c = RankCoordinates::of(sizes, context->rank_);
  context->coordinates_ = c;
  const auto color = [&](Group group, int64_t within) {
    return static_cast<int>(within * 8 + group);
  };
  const int key = context->rank_;
  Communicator& w = *world;
  context->tensor_ = w.split(color(kTensor, c.stage * sizes.stage + c.attention_group), key);
  context->pipeline_ = w.split(color(kPipeline, c.index), key);
  context->attention_data_ =
      w.split(color(kAttentionData, c.stage * sizes.tensor + c.tensor_rank), key);
  context->expert_ = w.split(color(kExpert, c.stage * sizes.moe_tensor + c.moe_tensor_rank), key);
  context->moe_tensor_ = w.split(color(kMoeTensor, c.stage * sizes.expert + c.expert_rank), key);
  // With attention data parallelism only the ranks of my attention group share my tokens.
  const int64_t peers = sizes.data > 1 ? c.stage * sizes.stage + c.attention_group : c.stage;
  context->expert_token_peers_ = context->expert_->split(color(kTokenPeers, peers), key);
  context->world_ = std::move(world);
  return context;
}

std::shared_ptr<ParallelContext> ParallelContext::offline(const ParallelSizes& sizes, int64_t rank,
                                                          const GroupMaker& group) {
  DI_CHECK(rank >= 0 && rank < sizes.world, "ParallelContext: rank ", rank, " of a layout of ",
           sizes.world);
  std::shared_ptr<ParallelContext> context(new ParallelContext());
  context->rank_ = static_cast<int>(rank);
  context->world_size_ = static_cast<int>(sizes.world);
  context->sizes_ = sizes;
  const RankCoordinates c = RankCoordinates::of(sizes, rank);
  context->coordinates_ = c;
  const auto make = [&](int64_t r, int64_t n) {
    return group(static_cast<int>(r), static_cast<int>(n));
  };
  // Each group of build() orders its members by world rank, which (RankCoordinates) is the
  // order of the coordinate that varies inside it.
  context->world_ = make(rank, sizes.world);
  context->tensor_ = make(c.tensor_rank, sizes.tensor);
  context->pipeline_ = make(c.stage, sizes.pipeline);
  context->attention_data_ = make(c.attention_group, sizes.stage / sizes.tensor);
  context->expert_ = make(c.expert_rank, sizes.expert);
  context->moe_tensor_ = make(c.moe_tensor_rank, sizes.moe_tensor);
  // With attention data parallelism my token peers are the tensor / moe_tensor expert ranks of
  // my attention group (moe_tensor divides tensor), else the whole expert group.
  const int64_t peers = sizes.data > 1 ? sizes.tensor / sizes.moe_tensor : sizes.expert;
  context->expert_token_peers_ = make(c.expert_rank % peers, peers);
  return context;
}

std::shared_ptr<ParallelContext> ParallelContext::create(const ParallelRequest& request) {
  const int launched = launcher_world_size();
  if (launched == 1) {
    const int64_t needed = ParallelSizes::world_for(request);
    if (needed != 1) {
      fail(describe_request(request), " needs ", needed,
           " processes, and this one was not started by mpirun: launch it as `mpirun -np ", needed,
           " deepinfer ...` (docs/DISTRIBUTED.md; Debian: apt install openmpi-bin)");
    }
    return single_process();
  }
  // Checked before MPI starts, from mpirun's environment: every rank refuses alike.
  const ParallelSizes sizes = ParallelSizes::resolve(request, launched);
  mpi_init();
  std::shared_ptr<MpiCommunicator> mpi_world = MpiCommunicator::world();
  DI_CHECK(mpi_world->world_size() == launched, "MPI reports ", mpi_world->world_size(),
           " ranks but the launcher's environment says ", launched);
  // Every group is its own communicator, so group collectives never match the lockstep
  // broadcasts of the world.
  auto context = build(sizes, mpi_world);
  context->mpi_world_ = std::move(mpi_world);
  return context;
}

std::string ParallelContext::describe() const {
  if (!distributed()) return "one process";
  std::string groups;
  const auto add = [&](const char* name, int64_t size, int64_t index) {
    if (size > 1) groups += str_cat(groups.empty() ? "" : ", ", name, " ", index, "/", size);
  };
  add("tp", sizes_.tensor, coordinates_.tensor_rank);
  add("pp", sizes_.pipeline, coordinates_.stage);
  add("dp", sizes_.data, coordinates_.attention_group);
  add("ep", sizes_.expert, coordinates_.expert_rank);
  add("moe-tp", sizes_.moe_tensor, coordinates_.moe_tensor_rank);
  return str_cat("rank ", rank_, " of ", world_size_, groups.empty() ? "" : " (" + groups + ")");
}

}  // namespace deepinfer::parallel
