// Communicator semantics: the single-process implementation, and the typed helpers driven
// through a 3-rank thread group (the test transport the MoE expert-parallel tests use).
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "parallel/communicator.h"
#include "thread_communicator.h"

namespace deepinfer::parallel {
namespace {

TEST(SingleProcessCommunicator, EveryCollectiveIsACopy) {
  SingleProcessCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  comm.barrier();

  std::vector<float> values = {1.5f, -2.0f, 3.25f};
  comm.all_reduce_sum(values);
  EXPECT_EQ(values, (std::vector<float>{1.5f, -2.0f, 3.25f}));

  const std::vector<int32_t> ids = {7, 8, 9};
  EXPECT_EQ(comm.all_gather<int32_t>(ids), ids);

  const std::vector<double> send = {0.5, 1.5, 2.5, 3.5};
  const std::vector<int64_t> counts = {4};
  std::vector<double> recv;
  std::vector<int64_t> recv_counts;
  comm.all_to_all_v<double>(send, counts, recv, recv_counts);
  EXPECT_EQ(recv, send);
  EXPECT_EQ(recv_counts, counts);

  // Empty exchanges are legal (a rank whose tokens chose no remote expert).
  comm.all_to_all_v<double>(std::span<const double>(), std::vector<int64_t>{0}, recv, recv_counts);
  EXPECT_TRUE(recv.empty());
  EXPECT_EQ(recv_counts, std::vector<int64_t>{0});
}

TEST(SingleProcessCommunicator, RejectsCountsThatDoNotCoverTheBuffer) {
  SingleProcessCommunicator comm;
  const std::vector<float> send = {1, 2, 3};
  std::vector<float> recv;
  std::vector<int64_t> recv_counts;
  EXPECT_THROW(comm.all_to_all_v<float>(send, std::vector<int64_t>{2}, recv, recv_counts), Error);
  EXPECT_THROW(comm.all_to_all_v<float>(send, std::vector<int64_t>{1, 2}, recv, recv_counts),
               Error);
  EXPECT_THROW(comm.all_to_all_v<float>(send, std::vector<int64_t>{-1}, recv, recv_counts), Error);
}

// Rank r sends (r + 1) * (d + 1) values to rank d, value = 1000 r + 100 d + i; every rank
// must receive exactly the blocks addressed to it, in source-rank order.
TEST(ThreadCommunicator, AllToAllVDeliversBlocksInSourceRankOrder) {
  constexpr int kWorld = 3;
  testing::ThreadGroup group(kWorld);
  std::vector<std::vector<int32_t>> received(kWorld);
  std::vector<std::vector<int64_t>> received_counts(kWorld);
  group.run([&](int rank) {
    testing::ThreadCommunicator comm(group, rank);
    std::vector<int32_t> send;
    std::vector<int64_t> counts;
    for (int d = 0; d < kWorld; ++d) {
      counts.push_back((rank + 1) * (d + 1));
      for (int i = 0; i < counts.back(); ++i) send.push_back(1000 * rank + 100 * d + i);
    }
    comm.all_to_all_v<int32_t>(send, counts, received[rank], received_counts[rank]);
  });
  for (int d = 0; d < kWorld; ++d) {
    std::vector<int32_t> want;
    std::vector<int64_t> want_counts;
    for (int r = 0; r < kWorld; ++r) {
      want_counts.push_back((r + 1) * (d + 1));
      for (int i = 0; i < want_counts.back(); ++i) want.push_back(1000 * r + 100 * d + i);
    }
    EXPECT_EQ(received[d], want) << "rank " << d;
    EXPECT_EQ(received_counts[d], want_counts) << "rank " << d;
  }
}

TEST(ThreadCommunicator, AllReduceAndAllGather) {
  constexpr int kWorld = 3;
  testing::ThreadGroup group(kWorld);
  std::vector<std::vector<float>> sums(kWorld);
  std::vector<std::vector<int64_t>> gathered(kWorld);
  group.run([&](int rank) {
    testing::ThreadCommunicator comm(group, rank);
    sums[rank] = {static_cast<float>(rank), 0.5f * static_cast<float>(rank + 1)};
    comm.all_reduce_sum(sums[rank]);
    const std::vector<int64_t> mine = {rank, 10 * rank};
    gathered[rank] = comm.all_gather<int64_t>(mine);
    comm.barrier();
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(sums[r], (std::vector<float>{3.0f, 3.0f}));
    EXPECT_EQ(gathered[r], (std::vector<int64_t>{0, 0, 1, 10, 2, 20}));
  }
}

}  // namespace
}  // namespace deepinfer::parallel
