#pragma once
// Continuous batching: which sequences run in the next model step and how many of their
// tokens, under per-step budgets, with KV blocks from the block manager.
//
// There is no separate prefill / decode phase (as in vLLM v1): a sequence simply has tokens
// whose K/V is not computed yet. Each step schedules running decodes first (one token each),
// then running prefills, then admits waiting sequences; a prefill takes as many tokens as the
// remaining token budget allows (chunked prefill). When a running sequence cannot get a block,
// the lowest-priority / latest-arriving running sequence is preempted: its blocks are freed
// and it goes back to waiting, to be recomputed later.
//
// Attention data parallelism: one block manager per attention group (each group's ranks hold
// their own KV pool). A new sequence joins the least loaded group (fewest unfinished
// sequences, then most free blocks) and stays there; budgets, max_num_seqs, admission and
// preemption are per group, so one group's full pool never stalls another.
#include <cstdint>
#include <string>
#include <vector>

#include "cache/block_manager.h"
#include "engine/sequence.h"

namespace deepinfer::engine {

enum class SchedulingPolicy { fifo, priority };
// Parses "fifo" / "priority"; throws Error otherwise.
SchedulingPolicy parse_scheduling_policy(const std::string& name);

struct SchedulerConfig {
  int64_t max_num_seqs = 128;             // running sequences at most
  int64_t max_num_batched_tokens = 2048;  // tokens per model step at most
  SchedulingPolicy policy = SchedulingPolicy::fifo;
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // tokens [seq->num_computed, + num_tokens) run this step
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  int64_t num_tokens = 0;
  int64_t num_preempted = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, cache::BlockManager& blocks);
  // One block manager per attention group (they outlive the scheduler).
  Scheduler(const SchedulerConfig& config, std::vector<cache::BlockManager*> groups);

  const SchedulerConfig& config() const { return config_; }
  // Queues a sequence (status waiting). A sequence may arrive holding shared blocks with
  // num_computed > 0 (an n > 1 sibling); otherwise its prefix is looked up on admission.
  void add(Sequence* seq);
  SchedulerOutput schedule();
  // After the model ran `out`: advances num_computed and registers newly full blocks in the
  // prefix cache. Call before appending the sampled tokens.
  void commit(const SchedulerOutput& out);
  // Drops a sequence from whichever queue holds it and frees its blocks (finish or abort).
  void remove(Sequence* seq, FinishReason reason);

  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  int64_t num_groups() const { return static_cast<int64_t>(groups_.size()); }

 private:
  // Orders the waiting queue and picks victims: lower key runs first.
  bool runs_before(const Sequence* a, const Sequence* b) const;
  void insert_waiting(Sequence* seq);
  // Tokens of `left` to compute this step: within `budget` and the sequence's own cap.
  static int64_t chunk_size(const Sequence* seq, int64_t left, int64_t budget);
  // Schedules up to `want` tokens of a running sequence, preempting others (or itself) when
  // blocks run out. Returns false when `seq` itself was preempted.
  bool schedule_running(Sequence* seq, int64_t& budget, SchedulerOutput& out);
  // The block holder that runs last: any running or waiting one, or with `after`, only a
  // waiting one that runs after it (admission never preempts running sequences).
  // Only sequences of `group` are candidates (they hold that group's blocks).
  Sequence* pick_victim(const Sequence* after, int64_t group) const;
  cache::BlockManager& blocks_of(const Sequence* seq) const {
    return *groups_[static_cast<size_t>(seq->attention_group)];
  }
  int64_t least_loaded_group() const;
  void preempt(Sequence* seq, int64_t& budget, SchedulerOutput& out);
  bool admit(Sequence* seq, int64_t& budget, SchedulerOutput& out);

  SchedulerConfig config_;
  std::vector<cache::BlockManager*> groups_;
  std::vector<int64_t> group_sequences_;  // unfinished sequences per group
  std::vector<Sequence*> waiting_;        // sorted by runs_before
  std::vector<Sequence*> running_;        // admission order
  int64_t num_preemptions_ = 0;
};

}  // namespace deepinfer::engine
