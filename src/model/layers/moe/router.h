#pragma once
// The MoE router: a linear scoring of each token against every expert, then top-k
// selection exactly as transformers computes it for each family:
//   Qwen3-MoE        softmax, greedy,                norm_topk_prob (no epsilon)
//   DeepSeek-V2      softmax, greedy | group_limited_greedy (group score = max in group),
//                    x routed_scaling_factor (transformers 5 ignores norm_topk_prob there)
//   DeepSeek-V3,     sigmoid, noaux_tc: e_score_correction_bias is added for SELECTION only
//   GLM-4.5          (group score = sum of the group's top-2 biased scores); the weights are
//                    the unbiased scores; norm_topk_prob with +1e-20; x routed_scaling_factor
// Routing runs in f32 whatever the compute dtype (transformers keeps gate.weight and the
// bias in f32 for DeepSeek-V3 / GLM-4.5), so expert choice does not change with bf16 weights.
//
// Ties: equal scores go to the lower expert (or group) index. torch.topk on CPU breaks ties
// in an implementation-defined order (e.g. it returns experts [4, 7] for four equal
// maxima at [1, 2, 4, 7]), so no engine can promise torch's tie order; ours is documented
// and stable. With real-valued router weights exact ties do not occur in practice.
#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "model/weights.h"

namespace deepinfer::model {

enum class RouterScoring { softmax, sigmoid };
enum class TopkMethod { greedy, group_limited_greedy, noaux_tc };

struct RouterConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  RouterScoring scoring = RouterScoring::softmax;
  TopkMethod method = TopkMethod::greedy;
  int64_t n_group = 1;     // experts split into n_group equal groups (group-limited methods)
  int64_t topk_group = 1;  // a token may use experts of this many groups
  bool norm_topk_prob = false;
  float norm_eps = 0.0f;  // added to the renormalisation denominator (DeepSeek-V3/GLM: 1e-20)
  float routed_scaling_factor = 1.0f;

  // Throws Error("<where>: ...") for inconsistent settings.
  void validate(const std::string& where) const;
};

// Parses "greedy" / "group_limited_greedy" / "noaux_tc" and "softmax" / "sigmoid".
TopkMethod parse_topk_method(const std::string& name, const std::string& where);
RouterScoring parse_scoring(const std::string& name, const std::string& where);

// Selects top_k experts per token from router logits [tokens, num_experts].
// bias: e_score_correction_bias [num_experts] for noaux_tc, empty otherwise.
// experts / weights: [tokens, top_k]; slot order is descending selection score (ties: lower
// expert id first). Pure function of its inputs (one token never affects another).
void select_experts(const RouterConfig& config, const float* logits, int64_t tokens,
                    std::span<const float> bias, int32_t* experts, float* weights);

class MoeRouter {
 public:
  // Loads <prefix>.weight [num_experts, hidden] and, for noaux_tc, the correction bias
  // [num_experts] named `bias_name` (empty: <prefix>.e_score_correction_bias); both as f32.
  static MoeRouter load(WeightLoader& weights, const std::string& prefix, int64_t hidden,
                        const RouterConfig& config, const std::string& bias_name = "");
  // Builds a router from tensors in hand (tests); bias undefined unless noaux_tc.
  MoeRouter(RouterConfig config, Tensor weight, Tensor bias);

  const RouterConfig& config() const { return config_; }
  // x [tokens, hidden] -> experts / weights [tokens, top_k].
  void route(const float* x, int64_t tokens, int32_t* experts, float* weights,
             ThreadPool& pool) const;

 private:
  RouterConfig config_;
  Tensor weight_;  // [num_experts, hidden] f32
  Tensor bias_;    // [num_experts] f32 or undefined
};

}  // namespace deepinfer::model
