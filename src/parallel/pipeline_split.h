#pragma once
// Which decoder layers each pipeline stage holds. As vLLM's get_pp_indices: every stage gets
// layers / pp, and the remainder goes one each to the stages just before the last (the last
// stage also carries the final norm and lm_head, the first the embedding), so 3 layers over
// 2 stages are [0, 2) and [2, 3), 5 over 3 are [0, 2), [2, 4), [4, 5).
#include <cstdint>
#include <string>

namespace deepinfer::parallel {

struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  int64_t size() const { return end - begin; }
  bool contains(int64_t layer) const { return layer >= begin && layer < end; }
};

// Stage `stage` of `stages` over `num_layers` layers. Refuses (Error naming the numbers, with
// `where` saying whose layers) more stages than layers: a stage without layers would only
// pass its input on.
LayerRange pipeline_layers(int64_t num_layers, int64_t stage, int64_t stages,
                           const std::string& where = "the model");

}  // namespace deepinfer::parallel
