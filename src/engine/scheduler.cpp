#include "engine/scheduler.h"

#include <algorithm>
#include <tuple>

#include "core/error.h"

namespace deepinfer::engine {

SchedulingPolicy parse_scheduling_policy(const std::string& name) {
  if (name == "fifo") return SchedulingPolicy::fifo;
  if (name == "priority") return SchedulingPolicy::priority;
  fail("--scheduling-policy: expected fifo or priority, got '", name, "'");
}

Scheduler::Scheduler(const SchedulerConfig& config, cache::BlockManager& blocks)
    : Scheduler(config, std::vector<cache::BlockManager*>{&blocks}) {}

Scheduler::Scheduler(const SchedulerConfig& config, std::vector<cache::BlockManager*> groups)
    : config_(config), groups_(std::move(groups)), group_sequences_(groups_.size(), 0) {
  DI_CHECK(!groups_.empty(), "scheduler: no block manager");
  DI_CHECK(config.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got ", config.max_num_seqs);
  DI_CHECK(config.max_num_batched_tokens >= 1, "--max-num-batched-tokens must be >= 1, got ",
           config.max_num_batched_tokens);
}

bool Scheduler::runs_before(const Sequence* a, const Sequence* b) const {
  const bool by_priority = config_.policy == SchedulingPolicy::priority;
  const int64_t pa = by_priority ? a->priority : 0;
  const int64_t pb = by_priority ? b->priority : 0;
  return std::tie(pa, a->arrival, a->index) < std::tie(pb, b->arrival, b->index);
}

void Scheduler::insert_waiting(Sequence* seq) {
  seq->status = SequenceStatus::waiting;
  const auto at =
      std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                       [this](const Sequence* a, const Sequence* b) { return runs_before(a, b); });
  waiting_.insert(at, seq);
}

int64_t Scheduler::least_loaded_group() const {
  int64_t best = 0;
  for (int64_t g = 1; g < num_groups(); ++g) {
    const auto load = [&](int64_t i) {
      return std::make_pair(group_sequences_[static_cast<size_t>(i)],
                            -groups_[static_cast<size_t>(i)]->free_blocks());
    };
    if (load(g) < load(best)) best = g;
  }
  return best;
}

void Scheduler::add(Sequence* seq) {
  DI_CHECK(seq->num_computed < seq->num_tokens(),
           "scheduler: a sequence needs at least one token left to compute");
  // A sibling arrives in its leader's group (it shares the leader's blocks).
  if (seq->attention_group < 0) seq->attention_group = least_loaded_group();
  DI_CHECK(seq->attention_group < num_groups(), "scheduler: attention group ", seq->attention_group,
           " of ", num_groups());
  ++group_sequences_[static_cast<size_t>(seq->attention_group)];
  insert_waiting(seq);
}

Sequence* Scheduler::pick_victim(const Sequence* after, int64_t group) const {
  // Waiting sequences can hold blocks too (n > 1 siblings sharing their prompt); they are
  // victims like running ones, or a pool full of them could stall everything.
  Sequence* victim = nullptr;
  for (const auto* queue : {&running_, &waiting_}) {
    if (after != nullptr && queue == &running_) continue;
    for (Sequence* s : *queue) {
      if (s->attention_group != group || s->block_table.empty() ||
          (after != nullptr && !runs_before(after, s)))
        continue;
      if (victim == nullptr || runs_before(victim, s)) victim = s;
    }
  }
  return victim;
}

void Scheduler::preempt(Sequence* seq, int64_t& budget, SchedulerOutput& out) {
  if (seq->status == SequenceStatus::waiting) {
    blocks_of(seq).release(seq->block_table);
    seq->num_computed = 0;
    seq->chain = {};
    ++seq->num_preemptions;
    ++num_preemptions_;
    ++out.num_preempted;
    return;
  }
  // A victim already scheduled this step gives its tokens back.
  const auto chunk = std::find_if(out.chunks.begin(), out.chunks.end(),
                                  [seq](const ScheduledChunk& c) { return c.seq == seq; });
  if (chunk != out.chunks.end()) {
    budget += chunk->num_tokens;
    out.num_tokens -= chunk->num_tokens;
    out.chunks.erase(chunk);
  }
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  blocks_of(seq).release(seq->block_table);
  seq->num_computed = 0;
  seq->chain = {};
  ++seq->num_preemptions;
  ++num_preemptions_;
  ++out.num_preempted;
  insert_waiting(seq);
}

int64_t Scheduler::chunk_size(const Sequence* seq, int64_t left, int64_t budget) {
  const int64_t want = std::min(left, budget);
  return seq->max_chunk_tokens > 0 ? std::min(want, seq->max_chunk_tokens) : want;
}

bool Scheduler::schedule_running(Sequence* seq, int64_t& budget, SchedulerOutput& out) {
  const int64_t want = chunk_size(seq, seq->num_tokens() - seq->num_computed, budget);
  if (want <= 0) return true;
  while (!blocks_of(seq).allocate(seq->block_table, seq->num_computed + want)) {
    Sequence* victim = pick_victim(nullptr, seq->attention_group);
    DI_CHECK(victim != nullptr, "scheduler: KV pool exhausted with no block holder to preempt");
    preempt(victim, budget, out);
    if (victim == seq) return false;
  }
  out.chunks.push_back({seq, want});
  out.num_tokens += want;
  budget -= want;
  return true;
}

bool Scheduler::admit(Sequence* seq, int64_t& budget, SchedulerOutput& out) {
  // A sequence without blocks (new or preempted) starts from the longest cached prefix; an
  // n > 1 sibling arrives holding the prompt blocks it shares.
  cache::BlockManager& blocks = blocks_of(seq);
  const bool fresh = seq->block_table.empty();
  cache::PrefixMatch match;
  if (fresh) {
    DI_CHECK(seq->num_computed == 0, "scheduler: a sequence without blocks has computed tokens");
    if (seq->reads_prefix_cache) match = blocks.find_prefix(seq->tokens);
  }
  const int64_t start = fresh ? match.tokens : seq->num_computed;
  const int64_t want = chunk_size(seq, seq->num_tokens() - start, budget);
  const int64_t query =
      fresh && blocks.prefix_caching() && seq->reads_prefix_cache ? seq->num_tokens() : 0;
  while (!blocks.allocate(seq->block_table, start + want, &match, query)) {
    // Only blocks held by waiting sequences that run after this one may be reclaimed here.
    Sequence* victim = pick_victim(seq, seq->attention_group);
    if (victim == nullptr) return false;
    preempt(victim, budget, out);
  }
  if (fresh) {
    seq->num_computed = match.tokens;
    seq->chain = match.chain;
    if (seq->num_output() == 0 && seq->num_preemptions == 0) seq->num_cached_tokens = match.tokens;
  }
  seq->status = SequenceStatus::running;
  running_.push_back(seq);
  out.chunks.push_back({seq, want});
  out.num_tokens += want;
  budget -= want;
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  // Each attention group computes its own tokens: budgets and max_num_seqs are per group.
  std::vector<int64_t> budget(groups_.size(), config_.max_num_batched_tokens);
  const auto budget_of = [&](const Sequence* seq) -> int64_t& {
    return budget[static_cast<size_t>(seq->attention_group)];
  };
  // Decodes first (one token each, latency-critical), then running prefills continue.
  for (const bool decodes : {true, false}) {
    const std::vector<Sequence*> snapshot = running_;  // preemption edits running_
    for (Sequence* seq : snapshot) {
      if (budget_of(seq) <= 0) continue;
      if (seq->status != SequenceStatus::running) continue;  // preempted meanwhile
      const bool is_decode = seq->num_tokens() - seq->num_computed == 1;
      if (is_decode != decodes) continue;
      schedule_running(seq, budget_of(seq), out);
    }
  }
  // Admit waiting sequences in policy order while budgets last; in each group stop at the
  // first that does not fit so a large request is not starved by smaller later ones. Not
  // after a preemption: the pool is under pressure.
  if (out.num_preempted == 0) {
    std::vector<int64_t> running(groups_.size(), 0);
    for (const Sequence* seq : running_) ++running[static_cast<size_t>(seq->attention_group)];
    std::vector<bool> blocked(groups_.size(), false);
    for (size_t i = 0; i < waiting_.size();) {
      Sequence* seq = waiting_[i];
      const auto g = static_cast<size_t>(seq->attention_group);
      if (!blocked[g] && (budget[g] <= 0 || running[g] >= config_.max_num_seqs)) blocked[g] = true;
      if (blocked[g] || !admit(seq, budget[g], out)) {
        blocked[g] = true;
        if (std::all_of(blocked.begin(), blocked.end(), [](bool b) { return b; })) break;
        ++i;
        continue;
      }
      ++running[g];
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return out;
}

void Scheduler::commit(const SchedulerOutput& out) {
  for (const ScheduledChunk& c : out.chunks) {
    Sequence* seq = c.seq;
    seq->num_computed += c.num_tokens;
    blocks_of(seq).cache_full_blocks(seq->block_table, seq->tokens, seq->num_computed, seq->chain);
  }
}

void Scheduler::remove(Sequence* seq, FinishReason reason) {
  if (const auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
  } else if (const auto w = std::find(waiting_.begin(), waiting_.end(), seq); w != waiting_.end()) {
    waiting_.erase(w);
  }
  if (seq->attention_group < 0) {  // never added: holds no blocks
    seq->status = SequenceStatus::finished;
    seq->finish_reason = reason;
    return;
  }
  blocks_of(seq).release(seq->block_table);
  if (seq->status != SequenceStatus::finished)
    --group_sequences_[static_cast<size_t>(seq->attention_group)];
  seq->status = SequenceStatus::finished;
  seq->finish_reason = reason;
}

}  // namespace deepinfer::engine
