#include "parallel/pipeline_split.h"

#include "core/error.h"

namespace deepinfer::parallel {

LayerRange pipeline_layers(int64_t num_layers, int64_t stage, int64_t stages,
                           const std::string& where) {
  DI_CHECK(stages >= 1 && stage >= 0 && stage < stages, "pipeline stage ", stage, " of ", stages);
  DI_CHECK(stages <= num_layers, "--pipeline-parallel-size = ", stages, " is more than the ",
           num_layers, " decoder layers of ", where,
           ": every pipeline stage needs at least one layer");
  const int64_t base = num_layers / stages;
  const int64_t extra = num_layers % stages;
  // Stages [stages - 1 - extra, stages - 1) hold one layer more.
  const int64_t first_long = stages - 1 - extra;
  const auto layers_of = [&](int64_t s) { return base + (s >= first_long && s < stages - 1); };
  LayerRange range;
  for (int64_t s = 0; s < stage; ++s) range.begin += layers_of(s);
  range.end = range.begin + layers_of(stage);
  return range;
}

}  // namespace deepinfer::parallel
