#pragma once
// deepinfer validate's comparisons: a model against a reference model (another checkpoint, dtype
// or KV cache dtype of the same model) or against a transformers golden file, over prompts and a
// text. The CLI (src/cli/cmd_validate.cpp) only loads models and prints.
#include <cstdint>
#include <vector>

#include "validate/golden.h"
#include "validate/inputs.h"
#include "validate/probe.h"
#include "validate/report.h"

namespace deepinfer::validate {

struct ValidateOptions {
  int64_t max_new_tokens = 16;  // greedy tokens per prompt (reference models)
  int64_t window = 0;           // perplexity window; 0: max_position_embeddings, at most 1024
  int64_t stride = 0;           // 0: window / 2
  bool layers = false;      // compare every block output of the prompts' prefill (else the text's
                            // first window)
  double tolerance = 1e-2;  // relative error that makes a block "diverged"
};

// Throws Error unless `reference` can be compared with `model`: the same architecture and
// vocabulary (and, for `layers`, the same layer count and hidden size).
void check_comparable(const model::CausalLM& model, const model::CausalLM& reference, bool layers);
void check_comparable(const model::CausalLM& model, const Golden& golden, bool layers);

// Greedy agreement over the prompts, teacher-forced top-1 / KL on prompt + the reference's
// continuation and on the text's scored tokens, perplexity of both on `text` (when not empty),
// and with options.layers the block outputs of each prompt's prefill.
ValidationReport compare_models(ModelProbe& model, ModelProbe& reference,
                                const std::vector<ValidationPrompt>& prompts,
                                const std::vector<int32_t>& text, const ValidateOptions& options);

// Top-1 / KL of the model's next-token logits at every prompt position against the golden's,
// perplexity of both on the golden prompts, and with options.layers the block outputs.
ValidationReport compare_golden(ModelProbe& model, const Golden& golden,
                                const ValidateOptions& options);

// Relative error of every block both captures hold, in the model's order.
std::vector<BlockError> compare_blocks(const std::vector<LayerCapture::Entry>& model,
                                       const std::vector<LayerCapture::Entry>& reference);

}  // namespace deepinfer::validate
