#pragma once
// A Communicator that says "rank k of N" and refuses every collective: deepinfer convert builds
// the model as rank k of an N-rank run would load it (model loading never communicates), so
// the shard it writes holds exactly what that rank maps.
#include <memory>

#include "parallel/communicator.h"
#include "parallel/parallel_context.h"

namespace deepinfer::convert {

class OfflineRankCommunicator : public parallel::Communicator {
 public:
  OfflineRankCommunicator(int rank, int world_size);
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void barrier() override { refuse("barrier"); }
  void all_reduce_sum(std::span<float>) override { refuse("all_reduce_sum"); }
  void all_gather_bytes(std::span<const std::byte>, std::span<std::byte>) override {
    refuse("all_gather");
  }
  std::vector<int64_t> exchange_counts(std::span<const int64_t>) override {
    refuse("exchange_counts");
  }
  void all_to_all_v_bytes(std::span<const std::byte>, std::span<const int64_t>,
                          std::span<std::byte>, std::span<const int64_t>) override {
    refuse("all_to_all");
  }
  void broadcast_bytes(std::span<std::byte>, int) override { refuse("broadcast"); }
  void send_bytes(std::span<const std::byte>, int) override { refuse("send"); }
  void recv_bytes(std::span<std::byte>, int) override { refuse("recv"); }
  std::shared_ptr<parallel::Communicator> split(int, int) override { refuse("split"); }

 private:
  [[noreturn]] void refuse(const char* what) const;
  int rank_;
  int world_size_;
};

// The parallel layout of rank `rank` of `world_size` expert-parallel ranks, for loading only.
std::shared_ptr<parallel::ParallelContext> offline_rank_context(int rank, int world_size);
// Rank `rank` of the layout `sizes` (tensor x expert parallel), for loading only: every group
// an OfflineRankCommunicator with this rank's place in it.
std::shared_ptr<parallel::ParallelContext> offline_rank_context(
    const parallel::ParallelSizes& sizes, int rank);

}  // namespace deepinfer::convert
