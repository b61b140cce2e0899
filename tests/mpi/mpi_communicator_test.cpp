// MpiCommunicator under mpirun (any world size >= 2; test_mpi_ep.py runs 3 ranks): each
// collective against values worked out by hand from the rank numbers, once through single
// MPI calls and once through the piecewise paths (a tiny max message size), which carry
// payloads beyond MPI's int counts.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "core/error.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::parallel {
namespace {

class MpiCommunicatorTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    comm_ = MpiCommunicator::world();
    if (GetParam() > 0) comm_->set_max_message_bytes(GetParam());
  }
  std::shared_ptr<MpiCommunicator> comm_;
};

TEST_P(MpiCommunicatorTest, RankAndSizeAreTheLaunchers) {
  EXPECT_EQ(comm_->world_size(), launcher_world_size());
  EXPECT_EQ(comm_->rank(), launcher_rank());
  ASSERT_GE(comm_->world_size(), 2) << "run under mpirun -np 2 or more";
  comm_->barrier();
}

TEST_P(MpiCommunicatorTest, AllReduceSumsInRankOrder) {
  const int w = comm_->world_size();
  const int r = comm_->rank();
  // Element 0: rank 0 adds 1e8, rank 1 adds 1, the last rank -1e8. In rank order
  // (1e8 + 1) rounds to 1e8 in f32, so the sum is exactly 0 (any other order can give 1).
  std::vector<float> data(5, 0.0f);
  data[0] = r == 0 ? 1e8f : r == w - 1 ? -1e8f : r == 1 ? 1.0f : 0.0f;
  for (size_t i = 1; i < data.size(); ++i) data[i] = static_cast<float>(10 * r + i);
  comm_->all_reduce_sum(data);
  EXPECT_EQ(data[0], 0.0f);
  for (size_t i = 1; i < data.size(); ++i) {
    // sum over ranks q of (10 q + i) = 10 w (w - 1) / 2 + w i
    EXPECT_EQ(data[i], static_cast<float>(10 * w * (w - 1) / 2 + w * static_cast<int>(i)));
  }
}

TEST_P(MpiCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  const int w = comm_->world_size();
  const int r = comm_->rank();
  const std::vector<int32_t> mine = {r, 2 * r, 3 * r};
  const std::vector<int32_t> all = comm_->all_gather<int32_t>(mine);
  ASSERT_EQ(all.size(), static_cast<size_t>(3 * w));
  for (int q = 0; q < w; ++q) {
    EXPECT_EQ(all[3 * q], q);
    EXPECT_EQ(all[3 * q + 1], 2 * q);
    EXPECT_EQ(all[3 * q + 2], 3 * q);
  }
}

TEST_P(MpiCommunicatorTest, AllToAllVDeliversBlocksInSourceRankOrder) {
  const int w = comm_->world_size();
  const int r = comm_->rank();
  // Rank s sends (s + 1) (d + 1) elements of value 100 s + d to rank d; nothing to rank 1.
  const auto count = [](int s, int d) { return d == 1 ? 0 : (s + 1) * (d + 1); };
  std::vector<int32_t> send;
  std::vector<int64_t> send_counts;
  for (int d = 0; d < w; ++d) {
    send_counts.push_back(count(r, d));
    send.insert(send.end(), static_cast<size_t>(count(r, d)), 100 * r + d);
  }
  std::vector<int32_t> recv;
  std::vector<int64_t> recv_counts;
  comm_->all_to_all_v<int32_t>(send, send_counts, recv, recv_counts);
  std::vector<int32_t> want;
  for (int s = 0; s < w; ++s) {
    EXPECT_EQ(recv_counts[static_cast<size_t>(s)], count(s, r)) << "from rank " << s;
    want.insert(want.end(), static_cast<size_t>(count(s, r)), 100 * s + r);
  }
  EXPECT_EQ(recv, want);
}

TEST_P(MpiCommunicatorTest, BroadcastFromAnyRoot) {
  const int w = comm_->world_size();
  for (int root = 0; root < w; ++root) {
    std::vector<int64_t> data(7, comm_->rank() == root ? 1000 + root : -1);
    comm_->broadcast_bytes(std::as_writable_bytes(std::span(data)), root);
    EXPECT_EQ(data, std::vector<int64_t>(7, 1000 + root));
    std::vector<int64_t> idle(3, comm_->rank() == root ? 7 * root : -1);
    comm_->broadcast_bytes_idle(std::as_writable_bytes(std::span(idle)), root);
    EXPECT_EQ(idle, std::vector<int64_t>(3, 7 * root));
  }
}

TEST_P(MpiCommunicatorTest, SplitMakesGroupsOrderedByKey) {
  const int w = comm_->world_size();
  const int r = comm_->rank();
  // Even and odd ranks; within a group, reversed order (key = -rank).
  auto group = comm_->split(r % 2, -r);
  const int size = (w - r % 2 + 1) / 2;
  EXPECT_EQ(group->world_size(), size);
  const int members_above = (w - 1 - r) / 2;  // same parity, larger rank
  EXPECT_EQ(group->rank(), members_above);
  std::vector<float> one = {1.0f, static_cast<float>(r)};
  group->all_reduce_sum(one);
  float parity_sum = 0;
  for (int q = r % 2; q < w; q += 2) parity_sum += static_cast<float>(q);
  EXPECT_EQ(one[0], static_cast<float>(size));
  EXPECT_EQ(one[1], parity_sum);
}

TEST_P(MpiCommunicatorTest, MismatchedCountsAreErrors) {
  std::vector<int64_t> too_few(static_cast<size_t>(comm_->world_size() - 1), 0);
  EXPECT_THROW(comm_->exchange_counts(too_few), Error);
}

// 0: whole buffers per MPI call; 8 and 12: every payload in pieces of at most that many bytes.
INSTANTIATE_TEST_SUITE_P(MessageSize, MpiCommunicatorTest, ::testing::Values(0, 8, 12));

}  // namespace
}  // namespace deepinfer::parallel

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  deepinfer::parallel::mpi_init();
  // Only rank 0 prints the report; every rank's failures still set its exit status.
  if (deepinfer::parallel::launcher_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int status = RUN_ALL_TESTS();
  deepinfer::parallel::mpi_finalize();
  return status;
}
