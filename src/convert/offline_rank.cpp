#include "convert/offline_rank.h"

#include "core/error.h"

namespace deepinfer::convert {

OfflineRankCommunicator::OfflineRankCommunicator(int rank, int world_size)
    : rank_(rank), world_size_(world_size) {
  DI_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "rank ", rank, " of ", world_size);
}

void OfflineRankCommunicator::refuse(const char* what) const {
  fail("internal: ", what, " called while converting rank ", rank_, " of ", world_size_,
       " (model loading must not communicate)");
}

std::shared_ptr<parallel::ParallelContext> offline_rank_context(int rank, int world_size) {
  auto comm = std::make_shared<OfflineRankCommunicator>(rank, world_size);
  return parallel::ParallelContext::from(comm, comm);
}

std::shared_ptr<parallel::ParallelContext> offline_rank_context(
    const parallel::ParallelSizes& sizes, int rank) {
  return parallel::ParallelContext::offline(
      sizes, rank, [](int r, int n) { return std::make_shared<OfflineRankCommunicator>(r, n); });
}

}  // namespace deepinfer::convert
