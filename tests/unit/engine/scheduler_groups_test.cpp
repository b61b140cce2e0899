// The scheduler with attention data parallelism: one block manager per attention group.
#include <gtest/gtest.h>

#include <deque>
#include <memory>

#include "engine/scheduler.h"

namespace deepinfer::engine {
namespace {

struct Groups {
  Groups(int64_t groups, int64_t num_blocks, SchedulerConfig config)
      : scheduler(config, [&] {
          for (int64_t g = 0; g < groups; ++g) pools.emplace_back(num_blocks, 4, false);
          std::vector<cache::BlockManager*> out;
          for (auto& p : pools) out.push_back(&p);
          return out;
        }()) {}

  Sequence* add(int64_t prompt_len, int64_t group = -1) {
    auto s = std::make_unique<Sequence>();
    s->attention_group = group;
    s->request = seqs.size();
    s->arrival = seqs.size();
    s->tokens.assign(static_cast<size_t>(prompt_len), 3);
    s->prompt_len = prompt_len;
    scheduler.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  SchedulerOutput step() {
    SchedulerOutput out = scheduler.schedule();
    std::vector<Sequence*> ended;
    for (const auto& c : out.chunks)
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) ended.push_back(c.seq);
    scheduler.commit(out);
    for (Sequence* s : ended) s->tokens.push_back(1);
    return out;
  }

  std::deque<cache::BlockManager> pools;
  Scheduler scheduler;
  std::deque<std::unique_ptr<Sequence>> seqs;
};

TEST(SchedulerGroups, NewSequencesJoinTheLeastLoadedGroupAndStay) {
  Groups h(2, 64, {8, 64, SchedulingPolicy::fifo});
  Sequence* a = h.add(5);
  Sequence* b = h.add(5);
  Sequence* c = h.add(5);
  EXPECT_EQ(a->attention_group, 0);
  EXPECT_EQ(b->attention_group, 1);
  EXPECT_EQ(c->attention_group, 0);  // 1 sequence each: most free blocks, then the lowest
  h.step();
  // Blocks come from the group's own pool.
  EXPECT_EQ(h.pools[0].free_blocks(), 64 - 4);
  EXPECT_EQ(h.pools[1].free_blocks(), 64 - 2);
  h.scheduler.remove(a, FinishReason::stop);
  h.scheduler.remove(c, FinishReason::stop);
  EXPECT_EQ(h.add(5)->attention_group, 0);  // group 0 is empty again
}

TEST(SchedulerGroups, AFullGroupDoesNotHoldBackAdmissionToAnother) {
  Groups h(2, 3, {8, 64, SchedulingPolicy::fifo});  // 3 blocks of 4 tokens per group
  Sequence* a = h.add(11);                          // group 0: its whole pool
  Sequence* b = h.add(4);                           // group 1
  h.step();
  Sequence* c = h.add(4, 0);  // group 0 (as a sibling arrives): no block free there
  Sequence* d = h.add(4);
  ASSERT_EQ(d->attention_group, 1);
  const SchedulerOutput out = h.step();
  EXPECT_EQ(out.num_preempted, 0);
  EXPECT_EQ(c->status, SequenceStatus::waiting);  // first in line, but its group is full
  EXPECT_EQ(d->status, SequenceStatus::running);  // admitted all the same
  EXPECT_EQ(a->status, SequenceStatus::running);
  EXPECT_EQ(b->status, SequenceStatus::running);
}

}  // namespace
}  // namespace deepinfer::engine
