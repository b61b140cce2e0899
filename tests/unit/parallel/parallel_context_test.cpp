#include "parallel/parallel_context.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "parallel/thread_communicator.h"

namespace deepinfer::parallel {
namespace {

ParallelRequest request(int64_t tp, int64_t pp, int64_t ep, int64_t dp) {
  ParallelRequest r;
  r.tensor.size = tp;
  r.pipeline.size = pp;
  r.expert.size = ep;
  r.data.size = dp;
  return r;
}

std::string refusal(const ParallelRequest& r, int64_t world) {
  try {
    ParallelSizes::resolve(r, world);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelSizes, WorldForALayout) {
  EXPECT_EQ(ParallelSizes::world_for(request(1, 1, 2, 1)), 2);
  EXPECT_EQ(ParallelSizes::world_for(request(2, 1, 2, 1)), 2);  // vLLM -tp 2 with EP
  EXPECT_EQ(ParallelSizes::world_for(request(2, 2, 1, 1)), 4);
  EXPECT_EQ(ParallelSizes::world_for(request(1, 1, 2, 2)), 2);  // DP attention 2 + EP 2
  EXPECT_EQ(ParallelSizes::world_for(request(2, 1, 4, 2)), 4);
}

TEST(ParallelSizes, RefusalsNameTheNumbers) {
  EXPECT_NE(
      refusal(request(1, 3, 1, 1), 4).find("--pipeline-parallel-size = 3 does not divide the 4"),
      std::string::npos);
  EXPECT_NE(refusal(request(3, 1, 1, 1), 4).find("--tensor-parallel-size = 3 does not divide"),
            std::string::npos);
  EXPECT_NE(refusal(request(1, 1, 3, 1), 4).find("--expert-parallel-size = 3 does not divide"),
            std::string::npos);
  // DP attention must cover the stage.
  EXPECT_NE(refusal(request(1, 1, 4, 2), 4).find("= 2 but a pipeline stage has 4"),
            std::string::npos);
  // Neither tp nor ep covers the stage, and no DP: idle replicas.
  EXPECT_NE(refusal(request(2, 1, 2, 1), 4).find("cover neither all of them"), std::string::npos);
  // DP attention with expert shards split across attention groups.
  EXPECT_NE(refusal(request(1, 1, 1, 2), 2).find("does not divide --tensor-parallel-size = 1"),
            std::string::npos);
  EXPECT_EQ(refusal(request(2, 2, 2, 1), 4), "");
}

TEST(RankCoordinates, StageMajorThenAttentionGroupThenTensor) {
  const ParallelSizes s = ParallelSizes::resolve(request(2, 2, 4, 2), 8);  // stage of 4
  EXPECT_EQ(s.stage, 4);
  EXPECT_EQ(s.moe_tensor, 1);
  const RankCoordinates c = RankCoordinates::of(s, 7);
  EXPECT_EQ(c.stage, 1);
  EXPECT_EQ(c.index, 3);
  EXPECT_EQ(c.tensor_rank, 1);
  EXPECT_EQ(c.attention_group, 1);
  EXPECT_EQ(c.expert_rank, 3);
}

// Builds a layout over thread ranks and records each rank's groups as sets of world ranks.
struct Seen {
  std::mutex mutex;
  std::map<int, std::map<std::string, std::vector<int>>> groups;  // rank -> group -> members
};

std::vector<int> members(Communicator& world, Communicator& group) {
  // Who is in my group: gather world ranks within it.
  const int mine = world.rank();
  std::vector<int> all = group.all_gather<int>(std::span<const int>(&mine, 1));
  return all;
}

TEST(ParallelContext, GroupsOverThreads) {
  const ParallelSizes sizes = ParallelSizes::resolve(request(2, 2, 2, 1), 4);  // tp 2, pp 2, ep 2
  testing::ThreadGroup world_group(4);
  Seen seen;
  world_group.run([&](int rank) {
    auto world = std::make_shared<testing::ThreadCommunicator>(world_group, rank);
    auto context = ParallelContext::build(sizes, world);
    std::map<std::string, std::vector<int>> g;
    g["tensor"] = members(*world, *context->tensor_group());
    g["pipeline"] = members(*world, *context->pipeline_group());
    g["expert"] = members(*world, *context->expert_group());
    g["moe_tensor"] = members(*world, *context->moe_tensor_group());
    g["peers"] = members(*world, *context->expert_token_peers());
    std::lock_guard lock(seen.mutex);
    seen.groups[rank] = g;
  });
  EXPECT_EQ(seen.groups[0]["tensor"], (std::vector<int>{0, 1}));
  EXPECT_EQ(seen.groups[3]["tensor"], (std::vector<int>{2, 3}));
  EXPECT_EQ(seen.groups[1]["pipeline"], (std::vector<int>{1, 3}));
  EXPECT_EQ(seen.groups[2]["expert"], (std::vector<int>{2, 3}));
  EXPECT_EQ(seen.groups[2]["moe_tensor"], (std::vector<int>{2}));
  EXPECT_EQ(seen.groups[2]["peers"], (std::vector<int>{2, 3}));
}

TEST(ParallelContext, DataParallelAttentionPeers) {
  // 4 ranks: tp 2 x dp 2, experts over all 4: my token peers are my attention group.
  const ParallelSizes sizes = ParallelSizes::resolve(request(2, 1, 4, 2), 4);
  testing::ThreadGroup world_group(4);
  Seen seen;
  world_group.run([&](int rank) {
    auto world = std::make_shared<testing::ThreadCommunicator>(world_group, rank);
    auto context = ParallelContext::build(sizes, world);
    std::map<std::string, std::vector<int>> g;
    g["expert"] = members(*world, *context->expert_group());
    g["peers"] = members(*world, *context->expert_token_peers());
    g["data"] = members(*world, *context->attention_data_group());
    std::lock_guard lock(seen.mutex);
    seen.groups[rank] = g;
  });
  EXPECT_EQ(seen.groups[1]["expert"], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(seen.groups[1]["peers"], (std::vector<int>{0, 1}));
  EXPECT_EQ(seen.groups[3]["peers"], (std::vector<int>{2, 3}));
  EXPECT_EQ(seen.groups[3]["data"], (std::vector<int>{1, 3}));
}

// A group that only says where this rank sits in it (what ParallelContext::offline makes).
class PlaceOnly : public SingleProcessCommunicator {
 public:
  PlaceOnly(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

 private:
  int rank_;
  int size_;
};

TEST(ParallelContext, OfflineGroupsSitWhereBuiltOnesDo) {
  // deepinfer convert loads rank k without communicating: each of its groups must have the
  // rank and size build() gives rank k over real (thread) communicators.
  const std::vector<std::pair<ParallelRequest, int64_t>> layouts = {
      {request(2, 1, 2, 1), 2},  // -tp 2 --enable-expert-parallel
      {request(4, 1, 2, 1), 4},  // ep 2 x moe_tp 2
      {request(2, 1, 4, 1), 4},  // two attention replicas, experts over all four
      {request(2, 1, 4, 2), 4},  // attention data parallel: token peers are my group's
      {request(2, 2, 2, 1), 4},  // two stages
  };
  for (const auto& [req, world] : layouts) {
    const ParallelSizes sizes = ParallelSizes::resolve(req, world);
    testing::ThreadGroup threads(static_cast<int>(world));
    threads.run([&](int rank) {
      auto built = ParallelContext::build(
          sizes, std::make_shared<testing::ThreadCommunicator>(threads, rank));
      auto offline = ParallelContext::offline(
          sizes, rank, [](int r, int n) { return std::make_shared<PlaceOnly>(r, n); });
      const auto same = [&](const char* what, const Communicator& a, const Communicator& b) {
        EXPECT_EQ(a.rank(), b.rank()) << describe_request(req) << " rank " << rank << " " << what;
        EXPECT_EQ(a.world_size(), b.world_size())
            << describe_request(req) << " rank " << rank << " " << what;
      };
      same("world", *built->world(), *offline->world());
      same("tensor", *built->tensor_group(), *offline->tensor_group());
      same("pipeline", *built->pipeline_group(), *offline->pipeline_group());
      same("attention data", *built->attention_data_group(), *offline->attention_data_group());
      same("expert", *built->expert_group(), *offline->expert_group());
      same("moe tensor", *built->moe_tensor_group(), *offline->moe_tensor_group());
      same("token peers", *built->expert_token_peers(), *offline->expert_token_peers());
    });
  }
}

TEST(ThreadCommunicator, SendAndReceiveInOrder) {
  testing::ThreadGroup group(2);
  std::vector<int> got;
  group.run([&](int rank) {
    testing::ThreadCommunicator comm(group, rank);
    if (rank == 0) {
      for (int v : {5, 6}) comm.send<int>(std::span<const int>(&v, 1), 1);
    } else {
      for (int i = 0; i < 2; ++i) {
        int v = 0;
        comm.recv<int>(std::span<int>(&v, 1), 0);
        got.push_back(v);
      }
    }
  });
  EXPECT_EQ(got, (std::vector<int>{5, 6}));
}

}  // namespace
}  // namespace deepinfer::parallel
