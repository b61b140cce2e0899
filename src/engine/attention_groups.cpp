#include "engine/attention_groups.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::engine {

GroupStep select_attention_group(const model::ForwardBatch& step, int64_t group) {
  GroupStep out;
  const auto total = static_cast<int64_t>(step.tokens.size());
  // The step row each of this group's rows came from (-1: another group's).
  std::vector<int64_t> packed_row(static_cast<size_t>(total), -1);
  for (const model::SequenceSlice& s : step.sequences) {
    if (s.attention_group != group) continue;
    DI_CHECK(s.begin >= 0 && s.count >= 0 && s.begin + s.count <= total,
             "attention groups: sequence rows outside the step");
    const auto begin = static_cast<int64_t>(out.tokens.size());
    for (int64_t r = s.begin; r < s.begin + s.count; ++r) {
      packed_row[static_cast<size_t>(r)] = static_cast<int64_t>(out.tokens.size());
      out.tokens.push_back(step.tokens[static_cast<size_t>(r)]);
      out.positions.push_back(step.positions[static_cast<size_t>(r)]);
    }
    model::SequenceSlice slice = s;
    slice.begin = begin;
    out.batch.sequences.push_back(slice);
  }
  for (size_t i = 0; i < step.logit_rows.size(); ++i) {
    const int64_t row = step.logit_rows[i];
    DI_CHECK(row >= 0 && row < total, "attention groups: logit row ", row, " outside the step");
    if (packed_row[static_cast<size_t>(row)] < 0) continue;
    out.batch.logit_rows.push_back(packed_row[static_cast<size_t>(row)]);
    out.logit_slots.push_back(static_cast<int64_t>(i));
  }
  out.batch.tokens = out.tokens;
  out.batch.positions = out.positions;
  return out;
}

void run_attention_groups(model::CausalLM& model, const model::ForwardBatch& step,
                          cache::KvCache& cache, float* logits, ThreadPool& pool,
                          const parallel::ParallelContext& layout) {
  const auto vocab = static_cast<size_t>(model.vocab_size());
  const int64_t mine = layout.coordinates().attention_group;
  const GroupStep own = select_attention_group(step, mine);
  std::vector<float> own_logits(own.batch.logit_rows.size() * vocab);
  model.forward(own.batch, cache, own_logits.data(), pool);
  if (layout.coordinates().tensor_rank != 0) return;  // its group's tensor rank 0 reports
  parallel::Communicator& groups = *layout.attention_data_group();
  if (groups.rank() != 0) {
    groups.send<float>(own_logits, 0);
    return;
  }
  const auto place = [&](const std::vector<int64_t>& slots, const std::vector<float>& rows) {
    for (size_t r = 0; r < slots.size(); ++r) {
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(r * vocab), vocab,
                  logits + static_cast<size_t>(slots[r]) * vocab);
    }
  };
  place(own.logit_slots, own_logits);
  std::vector<float> rows;
  for (int g = 1; g < groups.world_size(); ++g) {
    const GroupStep theirs = select_attention_group(step, g);
    rows.resize(theirs.logit_slots.size() * vocab);
    groups.recv<float>(rows, g);
    place(theirs.logit_slots, rows);
  }
}

}  // namespace deepinfer::engine
