#include "model/micro_batches.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::model {

std::vector<MicroBatch> split_micro_batches(const ForwardBatch& step, int64_t parts) {
  DI_CHECK(parts >= 1, "num_micro_batches must be at least 1, got ", parts);
  const auto sequences = static_cast<int64_t>(step.sequences.size());
  const auto total = static_cast<int64_t>(step.tokens.size());
  if (sequences == 0) {  // nothing to cut (a rank with no tokens this step)
    MicroBatch whole{step, 0, {}};
    for (size_t r = 0; r < step.logit_rows.size(); ++r)
      whole.logit_slots.push_back(static_cast<int64_t>(r));
    return {std::move(whole)};
  }
  parts = std::min(parts, sequences);
  // Cut after the sequence that brings the running token count to j / parts of the total.
  std::vector<int64_t> cuts = {0};
  int64_t seen = 0;
  for (int64_t s = 0; s + 1 < sequences; ++s) {
    seen += step.sequences[static_cast<size_t>(s)].count;
    const auto next = static_cast<int64_t>(cuts.size());
    if (next < parts && seen * parts >= total * next) cuts.push_back(s + 1);
  }
  cuts.push_back(sequences);

  std::vector<MicroBatch> out;
  size_t assigned = 0;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const auto& first = step.sequences[static_cast<size_t>(cuts[c])];
    const auto& last = step.sequences[static_cast<size_t>(cuts[c + 1] - 1)];
    const int64_t begin = first.begin;
    const int64_t end = last.begin + last.count;
    DI_CHECK(begin >= 0 && begin <= end && end <= total,
             "micro-batches: sequences are not laid out in row order");
    MicroBatch part;
    part.first_token = begin;
    part.batch.tokens =
        step.tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    part.batch.positions =
        step.positions.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    for (int64_t s = cuts[c]; s < cuts[c + 1]; ++s) {
      SequenceSlice slice = step.sequences[static_cast<size_t>(s)];
      slice.begin -= begin;
      part.batch.sequences.push_back(slice);
    }
    for (size_t r = 0; r < step.logit_rows.size(); ++r) {
      const int64_t row = step.logit_rows[r];
      if (row < begin || row >= end) continue;
      part.batch.logit_rows.push_back(row - begin);
      part.logit_slots.push_back(static_cast<int64_t>(r));
    }
    assigned += part.logit_slots.size();
    out.push_back(std::move(part));
  }
  DI_CHECK(assigned == step.logit_rows.size(), "micro-batches: ", step.logit_rows.size() - assigned,
           " logit rows outside every sequence");
  return out;
}

}  // namespace deepinfer::model
