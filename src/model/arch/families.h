#pragma once
// Builders of every model family; model/registry.cpp maps architecture names to them.
#include <memory>

#include "model/causal_lm.h"

namespace deepinfer::model {

std::unique_ptr<CausalLM> build_qwen2(const io::ModelConfig& config, WeightLoader& weights);
std::unique_ptr<CausalLM> build_qwen3(const io::ModelConfig& config, WeightLoader& weights);

}  // namespace deepinfer::model
