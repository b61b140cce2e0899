#include "convert/recorded_weights.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>

#include "core/error.h"

namespace deepinfer::convert {
namespace {

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// `name` is one expert's matrix of the layer under `prefix`: "<prefix>.<number>.<rest>".
bool is_expert_of(const std::string& name, const std::string& prefix) {
  return name.size() > prefix.size() + 1 && name.compare(0, prefix.size(), prefix) == 0 &&
         name[prefix.size()] == '.' && is_digit(name[prefix.size() + 1]);
}

}  // namespace

bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      size_t ei = i, ej = j;
      while (ei < a.size() && is_digit(a[ei])) ++ei;
      while (ej < b.size() && is_digit(b[ej])) ++ej;
      const std::string da = a.substr(i, ei - i), db = b.substr(j, ej - j);
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

void RecordedWeights::record(const std::string& name, const Tensor& tensor, model::MatrixUse,
                             std::optional<io::TensorSlice> slice) {
  const auto [it, inserted] = recorded_.try_emplace(name, RecordedTensor{name, tensor, slice});
  if (inserted) return;
  // A tensor loaded twice (a tied weight, a replicated KV head) must be the same part both
  // times: a shard holds one tensor under each name.
  const RecordedTensor& first = it->second;
  DI_CHECK(first.slice == slice && first.tensor.dtype() == tensor.dtype() &&
               first.tensor.shape() == tensor.shape() &&
               std::memcmp(first.tensor.raw(), tensor.raw(), tensor.nbytes()) == 0,
           "internal: tensor '", name, "' was loaded twice as different parts (",
           first.tensor.describe(), ", then ", tensor.describe(),
           "); a converted shard can hold only one");
}

void RecordedWeights::record_expert_stack(const std::string& prefix, int64_t num_experts,
                                          int64_t first, const Tensor& gate_up, const Tensor& down,
                                          const Tensor& gate_up_scale, const Tensor& down_scale) {
  stacks_[prefix] = {num_experts, first, gate_up, down, gate_up_scale, down_scale};
}

std::vector<RecordedTensor> RecordedWeights::tensors(bool stack_experts) const {
  std::map<std::string, RecordedTensor> out = recorded_;
  if (stack_experts) {
    for (const auto& [prefix, stack] : stacks_) {
      for (auto it = out.begin(); it != out.end();) {
        it = is_expert_of(it->first, prefix) ? out.erase(it) : std::next(it);
      }
      const int64_t count = stack.gate_up.dim(0);
      std::optional<io::TensorSlice> slice;
      if (count != stack.num_experts)
        slice = io::TensorSlice{0, stack.first, stack.first + count, stack.num_experts};
      out[prefix + ".gate_up_proj"] = {prefix + ".gate_up_proj", stack.gate_up, slice};
      out[prefix + ".down_proj"] = {prefix + ".down_proj", stack.down, slice};
      if (stack.gate_up_scale.defined()) {  // the names WeightLoader reads them back by
        out[prefix + ".gate_up_proj_scale"] = {prefix + ".gate_up_proj_scale", stack.gate_up_scale,
                                               slice};
        out[prefix + ".down_proj_scale"] = {prefix + ".down_proj_scale", stack.down_scale, slice};
      }
    }
  }
  std::vector<RecordedTensor> list;
  list.reserve(out.size());
  for (auto& [name, t] : out) list.push_back(std::move(t));
  std::sort(list.begin(), list.end(), [](const RecordedTensor& a, const RecordedTensor& b) {
    return natural_less(a.name, b.name);
  });
  return list;
}

}  // namespace deepinfer::convert
