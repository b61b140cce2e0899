#pragma once
// Pipeline micro-batches: a step's sequences cut into consecutive groups of about equal
// tokens, each a ForwardBatch of its own (rows rebased to 0) that knows which of the step's
// logit rows it serves. Every rank cuts the same step the same way (pure arithmetic).
#include <cstdint>
#include <vector>

#include "model/forward_batch.h"

namespace deepinfer::model {

struct MicroBatch {
  ForwardBatch batch;       // tokens, positions, sequences and logit rows of this part
  int64_t first_token = 0;  // its first row in the step
  // For each of batch.logit_rows, its index in the step's logit_rows (where its logits go).
  std::vector<int64_t> logit_slots;
};

// At most `parts` non-empty micro-batches (fewer when the step has fewer sequences); a
// sequence is never split. Logit rows keep their step order within each part.
std::vector<MicroBatch> split_micro_batches(const ForwardBatch& step, int64_t parts);

}  // namespace deepinfer::model
