#pragma once
// A read-only window on the activations of a forward pass, for diagnostics (deepinfer validate
// --layers compares them between two models or against transformers). The model reports each
// block's output to the observer it was given; it knows nothing of what is done with them.
// Without an observer (the default) a forward pays one null check per block.
#include <cstdint>
#include <string_view>

namespace deepinfer::model {

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // `data` is [tokens, width] row-major f32, valid only during the call. `layer` is the decoder
  // layer (-1 for the embedding and the final norm); `block` names the output:
  //   "embedding", "final_norm"                 (layer -1)
  //   "input_norm", "attention", "post_attention_norm", "mlp" | "moe", "layer" (its output:
  //   the residual stream), and with GLM-4's sandwich norms "post_self_attn_norm",
  //   "post_mlp_norm".
  virtual void observe(int64_t layer, std::string_view block, const float* data, int64_t tokens,
                       int64_t width) = 0;
};

}  // namespace deepinfer::model
