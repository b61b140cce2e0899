#pragma once
// pytorch_model*.bin (torch.save's zip format) read without executing anything: a pickle
// opcode interpreter that knows only the opcodes and globals torch.save uses for a state dict
// (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter, the
// torch.*Storage types) and refuses anything else with a message naming it, before any effect.
// Tensors are views into the mapped archive (copied only when stored non-contiguous).
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace deepinfer::convert {

// The state dict in `path`, as (name, tensor) in the file's order. Throws Error naming the
// file and the refused opcode / global, or the malformed part.
std::vector<std::pair<std::string, Tensor>> read_torch_state_dict(const std::string& path);

}  // namespace deepinfer::convert
