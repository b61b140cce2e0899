// Several linears of one input (q / k / v, gate / up) through forward_same_input
// (model/layers/linear.h): one kernels::linear_grouped call with x quantized once for block
// weights of one type and layout, one forward() each otherwise. The expectation is each
// Linear's own forward(), which the grouped call must equal bit for bit: with biases, with m = 1
// (decode) and m >= 8 (the panel path), weights as stored (owned) and mapped from a file, which
// AVX2 repacks (kernels::repacks_blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../kernels/kernel_test_util.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "model/golden_test_util.h"
#include "model/layers/linear.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

using kernels::testing::random_floats;
using testing::mapped_copies;

Tensor f32_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  Tensor t = Tensor::zeros({rows, cols}, DType::f32);
  const auto values = random_floats(static_cast<size_t>(rows * cols), seed, -0.05f, 0.05f);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Linear linear_of(Tensor weight, uint32_t seed) {
  Linear l;
  l.in_features = weight.dim(1);
  l.out_features = weight.dim(0);
  l.weight = std::move(weight);
  l.bias = f32_matrix(1, l.out_features, seed).reshape({l.out_features});
  l.pack();
  return l;
}

void expect_group_equals_each_forward(const std::vector<Linear>& linears, ThreadPool& pool) {
  const int64_t k = linears.front().in_features;
  std::vector<const Linear*> group;
  for (const Linear& l : linears) group.push_back(&l);
  for (int64_t rows : {1, 3, 9}) {
    SCOPED_TRACE(str_cat("rows ", rows));
    const auto x = random_floats(static_cast<size_t>(rows * k), 31 + rows, -2.0f, 2.0f);
    std::vector<std::vector<float>> want, got;
    std::vector<float*> outputs;
    for (const Linear& l : linears) {
      want.emplace_back(static_cast<size_t>(rows * l.out_features), NAN);
      got.emplace_back(want.back().size(), NAN);
      l.forward(x.data(), rows, want.back().data(), pool);
      outputs.push_back(got.back().data());
    }
    forward_same_input(group, x.data(), rows, outputs, pool);
    for (size_t i = 0; i < linears.size(); ++i) EXPECT_EQ(got[i], want[i]) << "linear " << i;
  }
}

TEST(LinearGroup, SameInputGroupEqualsEachForwardBitwise) {
  ThreadPool pool(2);
  const int64_t k = 512, widths[] = {48, 16, 16};  // q, k, v of a GQA layer
  uint32_t seed = 40;
  for (DType type : {DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k, DType::q6_k}) {
    SCOPED_TRACE(dtype_name(type));
    std::vector<Tensor> stored;
    for (int64_t n : widths) stored.push_back(quantize_matrix(f32_matrix(n, k, ++seed), type));
    std::vector<Linear> owned, mapped;
    for (const Tensor& w : stored) owned.push_back(linear_of(w, ++seed));
    for (const Tensor& w : mapped_copies(stored, std::string(dtype_name(type))))
      mapped.push_back(linear_of(w, ++seed));
    if (kernels::repacks_blocks(type)) {
      for (const Linear& l : mapped) EXPECT_TRUE(kernels::reads_repacked_blocks(l.packed));
    }
    expect_group_equals_each_forward(owned, pool);
    expect_group_equals_each_forward(mapped, pool);
  }
}

// Linears that cannot share one call (two weight types, or a repacked and a stored one) run one
// forward() each: still each one's result.
TEST(LinearGroup, MixedTypesAndLayoutsFallBackToOneForwardEach) {
  ThreadPool pool(2);
  const Tensor q8 = quantize_matrix(f32_matrix(16, 256, 1), DType::q8_0);
  const Tensor q4 = quantize_matrix(f32_matrix(24, 256, 2), DType::q4_0);
  expect_group_equals_each_forward({linear_of(q8, 3), linear_of(q4, 4)}, pool);
  const std::vector<Tensor> mapped = mapped_copies({q4}, "mixed");
  expect_group_equals_each_forward({linear_of(q4, 5), linear_of(mapped.front(), 6)}, pool);
  const std::vector<Linear> one = {linear_of(q4, 7)};
  std::vector<float*> too_many = {nullptr, nullptr};
  std::vector<const Linear*> group = {&one.front()};
  EXPECT_THROW(forward_same_input(group, nullptr, 1, too_many, pool), Error);
}

}  // namespace
}  // namespace deepinfer::model
