#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>

#include "core/error.h"

namespace deepinfer::engine {
namespace {

// Sequences owned by the test; the "model" is simulated: after each step the scheduled
// chunks are committed and every sequence whose chunk reached its end gets one more token.
struct Harness {
  Harness(int64_t num_blocks, int64_t block_size, SchedulerConfig config, bool prefix = false)
      : blocks(num_blocks, block_size, prefix), scheduler(config, blocks) {}

  Sequence* add(int64_t prompt_len, int64_t priority = 0) {
    auto s = std::make_unique<Sequence>();
    s->request = seqs.size();
    s->arrival = seqs.size();
    s->priority = priority;
    for (int64_t i = 0; i < prompt_len; ++i) s->tokens.push_back(static_cast<int32_t>(i % 7));
    s->prompt_len = prompt_len;
    scheduler.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  SchedulerOutput step() {
    SchedulerOutput out = scheduler.schedule();
    std::vector<Sequence*> reached_end;
    for (const auto& c : out.chunks) {
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) reached_end.push_back(c.seq);
    }
    scheduler.commit(out);
    for (Sequence* s : reached_end) s->tokens.push_back(1);
    return out;
  }

  int64_t scheduled(const SchedulerOutput& out, const Sequence* s) const {
    for (const auto& c : out.chunks) {
      if (c.seq == s) return c.num_tokens;
    }
    return 0;
  }

  cache::BlockManager blocks;
  Scheduler scheduler;
  std::deque<std::unique_ptr<Sequence>> seqs;
};

TEST(Scheduler, ChunksPrefillsToTheTokenBudgetAndRunsDecodesFirst) {
  Harness h(64, 4, {8, 10, SchedulingPolicy::fifo});
  Sequence* a = h.add(3);
  auto out = h.step();
  EXPECT_EQ(h.scheduled(out, a), 3);  // whole prompt fits
  Sequence* b = h.add(25);
  out = h.step();
  EXPECT_EQ(h.scheduled(out, a), 1);  // decode first
  EXPECT_EQ(h.scheduled(out, b), 9);  // prefill chunk fills the rest of the budget
  EXPECT_EQ(out.num_tokens, 10);
  out = h.step();
  EXPECT_EQ(h.scheduled(out, a), 1);
  EXPECT_EQ(h.scheduled(out, b), 9);
  out = h.step();
  EXPECT_EQ(h.scheduled(out, b), 7);  // the last 7 prompt tokens
  EXPECT_EQ(b->num_output(), 1);
  EXPECT_EQ(b->num_computed, 25);
}

TEST(Scheduler, MaxNumSeqsBoundsTheRunningSet) {
  Harness h(64, 4, {2, 100, SchedulingPolicy::fifo});
  Sequence* a = h.add(2);
  Sequence* b = h.add(2);
  Sequence* c = h.add(2);
  auto out = h.step();
  EXPECT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(h.scheduled(out, c), 0);
  EXPECT_EQ(h.scheduler.num_waiting(), 1);
  h.scheduler.remove(a, FinishReason::length);
  out = h.step();
  EXPECT_EQ(h.scheduled(out, b), 1);
  EXPECT_EQ(h.scheduled(out, c), 2);
}

TEST(Scheduler, PreemptsTheLatestArrivalWhenBlocksRunOutAndRecomputesIt) {
  // 4 blocks of 2 tokens. a (3 tokens) and b (3 tokens) take 2 blocks each.
  Harness h(4, 2, {8, 100, SchedulingPolicy::fifo});
  Sequence* a = h.add(3);
  Sequence* b = h.add(3);
  h.step();             // both prefilled; each now has 4 tokens, 3 computed
  auto out = h.step();  // decodes fit their second block
  EXPECT_EQ(out.num_preempted, 0);
  // Each has 5 tokens, 4 computed: the next decode needs a third block each; only a gets one
  // after b (later arrival) is preempted.
  out = h.step();
  EXPECT_EQ(out.num_preempted, 1);
  EXPECT_EQ(h.scheduled(out, a), 1);
  EXPECT_EQ(h.scheduled(out, b), 0);
  EXPECT_EQ(b->status, SequenceStatus::waiting);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(h.scheduler.num_preemptions(), 1);
  // Once a finishes, b re-prefills its prompt and generated tokens in one chunk.
  h.scheduler.remove(a, FinishReason::length);
  out = h.step();
  EXPECT_EQ(h.scheduled(out, b), 5);
  EXPECT_EQ(h.blocks.free_blocks(), 1);
}

TEST(Scheduler, DecodeNeedingABlockPreemptsTheLatestArrivalOrItself) {
  {
    Harness h(3, 2, {8, 100, SchedulingPolicy::fifo});
    Sequence* a = h.add(4);  // 2 blocks
    Sequence* b = h.add(1);  // 1 block
    h.step();
    // a (5 tokens, 4 computed) needs a third block: b, the latest, is preempted.
    auto out = h.step();
    EXPECT_EQ(out.num_preempted, 1);
    EXPECT_EQ(h.scheduled(out, a), 1);
    EXPECT_EQ(b->status, SequenceStatus::waiting);
  }
  {
    Harness h(3, 2, {8, 100, SchedulingPolicy::fifo});
    Sequence* a = h.add(3);  // 2 blocks
    Sequence* b = h.add(2);  // 1 block
    h.step();
    // a fits its decode; b (the latest) needs a second block and preempts itself.
    auto out = h.step();
    EXPECT_EQ(out.num_preempted, 1);
    EXPECT_EQ(h.scheduled(out, a), 1);
    EXPECT_EQ(h.scheduled(out, b), 0);
    EXPECT_EQ(b->status, SequenceStatus::waiting);
    EXPECT_EQ(h.blocks.free_blocks(), 1);
  }
}

TEST(Scheduler, PriorityPolicyAdmitsLowerValuesFirstAndPreemptsHigherValues) {
  Harness h(64, 4, {1, 100, SchedulingPolicy::priority});
  Sequence* a = h.add(2, 5);
  Sequence* b = h.add(2, 1);
  Sequence* c = h.add(2, 3);
  Sequence* d = h.add(2, 1);  // same priority as b, later arrival
  std::vector<Sequence*> order;
  for (int i = 0; i < 4; ++i) {
    auto out = h.step();
    ASSERT_EQ(out.chunks.size(), 1u);
    order.push_back(out.chunks[0].seq);
    h.scheduler.remove(out.chunks[0].seq, FinishReason::length);
  }
  EXPECT_EQ(order, (std::vector<Sequence*>{b, d, c, a}));

  // fifo ignores priorities.
  Harness f(64, 4, {1, 100, SchedulingPolicy::fifo});
  Sequence* x = f.add(2, 5);
  f.add(2, 1);
  EXPECT_EQ(f.step().chunks[0].seq, x);
}

TEST(Scheduler, PriorityVictimIsTheHighestValueEvenIfItArrivedFirst) {
  Harness h(4, 2, {8, 100, SchedulingPolicy::priority});
  Sequence* low = h.add(3, 9);  // arrives first, least important
  Sequence* high = h.add(3, 0);
  h.step();
  h.step();
  auto out = h.step();
  EXPECT_EQ(out.num_preempted, 1);
  EXPECT_EQ(low->status, SequenceStatus::waiting);
  EXPECT_EQ(h.scheduled(out, high), 1);
}

TEST(Scheduler, RemoveFreesBlocksOfWaitingAndRunningSequences) {
  Harness h(16, 4, {1, 100, SchedulingPolicy::fifo});
  Sequence* a = h.add(9);
  Sequence* b = h.add(9);
  h.step();
  EXPECT_EQ(h.blocks.free_blocks(), 13);
  h.scheduler.remove(b, FinishReason::abort);  // waiting
  h.scheduler.remove(a, FinishReason::abort);  // running
  EXPECT_EQ(h.blocks.free_blocks(), 16);
  EXPECT_EQ(h.scheduler.num_running() + h.scheduler.num_waiting(), 0);
  EXPECT_EQ(a->finish_reason, FinishReason::abort);
  EXPECT_TRUE(h.step().empty());
}

TEST(Scheduler, AdmissionStartsFromTheCachedPrefix) {
  Harness h(32, 4, {8, 100, SchedulingPolicy::fifo}, /*prefix=*/true);
  Sequence* a = h.add(14);
  h.step();
  h.scheduler.remove(a, FinishReason::length);
  Sequence* b = h.add(14);  // same tokens (i % 7)
  auto out = h.step();
  EXPECT_EQ(b->num_cached_tokens, 12);
  EXPECT_EQ(h.scheduled(out, b), 2);
  EXPECT_EQ(h.blocks.stats().prefix_hit_tokens, 12);
}

TEST(Scheduler, RejectsInvalidBudgets) {
  cache::BlockManager blocks(4, 2, false);
  EXPECT_THROW(Scheduler({0, 10, SchedulingPolicy::fifo}, blocks), Error);
  EXPECT_THROW(Scheduler({1, 0, SchedulingPolicy::fifo}, blocks), Error);
  EXPECT_THROW(parse_scheduling_policy("lifo"), Error);
  EXPECT_EQ(parse_scheduling_policy("priority"), SchedulingPolicy::priority);
}

}  // namespace
}  // namespace deepinfer::engine

namespace deepinfer::engine {
namespace {

TEST(Scheduler, ASequenceChunkCapLimitsItsStepsButNotOthers) {
  Harness h(64, 4, {8, 32, SchedulingPolicy::fifo});
  Sequence* capped = h.add(12);
  capped->max_chunk_tokens = 5;
  Sequence* plain = h.add(20);
  auto out = h.step();
  EXPECT_EQ(h.scheduled(out, capped), 5);  // admitted with at most its cap
  EXPECT_EQ(h.scheduled(out, plain), 20);  // the rest of the budget goes on
  out = h.step();
  EXPECT_EQ(h.scheduled(out, capped), 5);  // running prefill: capped again
  out = h.step();
  EXPECT_EQ(h.scheduled(out, capped), 2);  // the last two prompt tokens
}

}  // namespace
}  // namespace deepinfer::engine
