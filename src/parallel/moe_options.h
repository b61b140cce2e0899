#pragma once
// How MoE layers exchange and balance their tokens across the expert group, as the user asked
// for it (ep_config.json, the YAML, the command line; parsed once in src/config). Reaches
// every MoE layer through model::LoadOptions::moe.
#include <cstdint>
#include <optional>
#include <string>

namespace deepinfer::parallel {

// Element type of the activation rows the dispatch and combine all-to-alls carry: rows are
// converted before sending and widened to f32 after receiving. f32 (the default) is exact.
enum class CommunicationDType { f32, bf16, f16 };

// "fp32" / "f32" / "float32", "bf16" / "bfloat16", "fp16" / "f16" / "float16"; `where` names
// the setting in the error.
CommunicationDType parse_communication_dtype(const std::string& name, const std::string& where);
const char* communication_dtype_name(CommunicationDType dtype);  // "f32", "bf16", "f16"
int64_t communication_dtype_bytes(CommunicationDType dtype);

// Expert-parallel load balancing (docs/DISTRIBUTED.md, "Expert load balancing").
struct EplbOptions {
  static constexpr int64_t kDefaultWindow = 1000;
  bool enabled = false;               // --enable-eplb / force_eplb: re-balance online
  int64_t num_redundant_experts = 0;  // extra physical expert slots over the expert group
  int64_t window = kDefaultWindow;    // forward calls whose expert load counts
  int64_t interval = 0;               // re-balance every N forward calls (0: never online)
  std::string load_file;              // placement at start from this recorded load
  std::string record_file;            // the global window load is written here
  int64_t num_nodes = 1;              // hierarchical placement when it divides the groups

  // Whether any of it is asked for (otherwise MoE layers keep today's fixed split).
  bool active() const {
    return enabled || num_redundant_experts > 0 || interval > 0 || !load_file.empty() ||
           !record_file.empty();
  }
  // Forward calls between the points where the ranks sum their load counters: the
  // re-balancing interval, else every call while recording (so the record is exact), else
  // the window.
  int64_t sync_interval() const {
    if (interval > 0) return interval;
    if (!record_file.empty()) return 1;
    return window;
  }
};

struct MoeOptions {
  CommunicationDType communication_dtype = CommunicationDType::f32;
  // ep_config capacity_factor (MoeConfig::capacity_factor); nullopt: every assignment kept.
  std::optional<double> capacity_factor;
  // enable_atb_moe: routed f32 / bf16 experts as one grouped job on packed panels (false: the
  // per-expert GEMMs of ExpertStack::forward, for A/B runs).
  bool fused_experts = true;
  EplbOptions eplb;
};

}  // namespace deepinfer::parallel
