#pragma once
// What the MoE layers of one model share about expert load: the options, the load recorded
// by an earlier run (--eplb-load-file), and each layer's latest global window load and
// balancedness, which go to the logs, /metrics and the record file (--eplb-record).
//
// Record / load file (JSON, written by rank 0 of the expert group):
//   {"format": "deepinfer-eplb-load-v1", "window": 1000, "num_ranks": 2,
//    "layers": [{"name": "model.layers.1.mlp", "forward_calls": 64,
//                "load": [412, 17, ...],             // tokens x top_k per logical expert
//                "placement": [0, 5, ...],           // physical slot -> logical expert
//                "balancedness_default": 0.61,       // of the load on experts [rE/W, ..)
//                "balancedness": 0.97,               // measured with "placement"
//                "rebalances": 1, "dropped_assignments": 0}]}
// Only "name" and "load" are read back; a layer missing from the file keeps the default
// placement. Thread-safe: the engine thread reports, HTTP threads read.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "parallel/moe_options.h"

namespace deepinfer::parallel {

struct LayerBalance {
  std::string name;
  int64_t forward_calls = 0;
  std::vector<uint64_t> load;       // global window load per logical expert
  std::vector<int64_t> placement;   // phy2log in force
  double balancedness_default = 1;  // the window load under the default split
  double balancedness = 1;          // measured under the placement in force
  int64_t rebalances = 0;
  uint64_t dropped = 0;  // capacity drops of this layer over the group since the start
};

struct EplbSummary {
  int64_t layers = 0;  // MoE layers that reported
  // Over all layers: mean rank load / max rank load with loads summed over layers.
  double balancedness_default = 1;
  double balancedness = 1;
  int64_t rebalances = 0;
  uint64_t dropped = 0;  // capacity drops over the expert group, every layer, since start
};

class EplbState {
 public:
  // `record_writer`: whether this process writes the record file (rank 0 of the group).
  EplbState(EplbOptions options, int num_ranks, bool record_writer);
  // Logs the summary (rank 0 of the group, when balancing was asked for).
  ~EplbState();
  EplbState(const EplbState&) = delete;
  EplbState& operator=(const EplbState&) = delete;

  const EplbOptions& options() const { return options_; }
  int num_ranks() const { return num_ranks_; }
  // The load recorded for `layer` in options().load_file, nullopt when absent (the file is
  // read at construction: a missing or malformed file is an error naming it).
  std::optional<std::vector<double>> recorded_load(const std::string& layer) const;

  // A layer's index among those of this model (order of registration: the same on every
  // rank, since every rank builds the same layers in order).
  int register_layer(const std::string& name);
  // A layer's state at one of its sync points; writes the record file when recording and
  // `layer` is the last registered layer (all layers of the step have reported).
  void report(int layer, LayerBalance balance);
  void add_dropped(uint64_t assignments);

  std::vector<LayerBalance> layers() const;
  EplbSummary summary() const;
  // Rank loads summed over layers, for the summary (kept per layer from the reports).
  void set_rank_loads(int layer, std::vector<double> default_loads, std::vector<double> loads);

 private:
  void write_record() const;  // mutex_ held

  EplbOptions options_;
  int num_ranks_;
  bool record_writer_;
  std::vector<std::pair<std::string, std::vector<double>>> recorded_;
  mutable std::mutex mutex_;
  std::vector<LayerBalance> layers_;
  std::vector<std::vector<double>> default_rank_loads_, rank_loads_;
  uint64_t dropped_ = 0;
};

}  // namespace deepinfer::parallel
