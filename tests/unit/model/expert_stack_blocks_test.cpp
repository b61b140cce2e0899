// MoE expert stacks in every block type (model/layers/moe/expert_stack.h). The stack slices
// expert j by row bytes; the expectation is computed without the stack: the same random blocks
// kept per expert in their own buffers, run through kernels::linear one projection at a time
// (bitwise equal), and through the f32 path with the blocks dequantized by the reference
// dequantizer (close: the block kernels round x to 8 bits). Model level: tiny-deepseek-v2-lite
// quantized at load (experts included) gives bitwise the logits of the same model quantized by
// gguf-py (tools/make_moe_quant_goldens.py), whose expert stacks map zero-copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/quant_blocks.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"
#include "model/golden_test_util.h"
#include "model/layers/moe/expert_stack.h"

namespace deepinfer::model {
namespace {

using namespace testing;

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// rows x cols of random valid blocks: random bytes with sane f16 scales (and mins).
// (f32: random values.)
std::vector<uint8_t> random_blocks(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  if (dtype == DType::f32) {
    std::uniform_real_distribution<float> value(-0.05f, 0.05f);
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& f : v) f = value(rng);
    std::vector<uint8_t> out(v.size() * sizeof(float));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  const QuantTraits& traits = *block_traits(dtype);
  std::uniform_real_distribution<float> scale(0.01f, 0.03f), small(0.0005f, 0.002f);
  const auto sign = [&] { return rng() % 2 ? 1.0f : -1.0f; };
  std::vector<uint8_t> out(static_cast<size_t>(rows) * dtype_bytes(dtype, cols));
  for (auto& byte : out) byte = static_cast<uint8_t>(rng());
  for (size_t at = 0; at < out.size(); at += traits.block_bytes) {
    uint8_t* b = out.data() + at;
    switch (dtype) {
      case DType::q8_0:
        put_f16(b, sign() * scale(rng) / 8);
        break;
      case DType::q4_0:
      case DType::q5_0:
        put_f16(b, sign() * scale(rng));
        break;
      case DType::q4_1:
      case DType::q5_1:
        put_f16(b, scale(rng));
        put_f16(b + 2, -0.1f * scale(rng) * 10);
        break;
      case DType::q4_k:
      case DType::q5_k:
        put_f16(b, sign() * small(rng));
        put_f16(b + 2, sign() * small(rng));
        break;
      default:  // q6_k
        put_f16(b + 208, sign() * small(rng));
        break;
    }
  }
  return out;
}

Tensor tensor_of(const std::vector<uint8_t>& bytes, Shape shape, DType dtype) {
  Tensor t = Tensor::zeros(std::move(shape), dtype);
  EXPECT_EQ(t.nbytes(), bytes.size());
  std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

std::vector<float> dequantized(DType dtype, const std::vector<uint8_t>& w, int64_t rows,
                               int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  if (dtype == DType::f32) {
    std::memcpy(out.data(), w.data(), w.size());
    return out;
  }
  const size_t row_bytes = block_traits(dtype)->block_bytes *
                           static_cast<size_t>(cols / block_traits(dtype)->block_size);
  for (int64_t r = 0; r < rows; ++r)
    block_traits(dtype)->dequantize_row(w.data() + static_cast<size_t>(r) * row_bytes,
                                        out.data() + r * cols, cols);
  return out;
}

// down(silu(gate x) * up x) with each projection a separate buffer.
std::vector<float> expert_by_hand(const float* x, int64_t rows, int64_t h, int64_t i,
                                  const void* gate, const void* up, DType gu_dtype,
                                  const void* down, DType down_dtype, ThreadPool& pool) {
  std::vector<float> g(static_cast<size_t>(rows * i)), u(g.size()),
      y(static_cast<size_t>(rows * h));
  kernels::linear(x, rows, h, gate, gu_dtype, i, nullptr, g.data(), pool);
  kernels::linear(x, rows, h, up, gu_dtype, i, nullptr, u.data(), pool);
  kernels::silu_mul(g.data(), u.data(), g.data(), rows * i);
  kernels::linear(g.data(), rows, i, down, down_dtype, h, nullptr, y.data(), pool);
  return y;
}

struct StackCase {
  DType gate_up;
  DType down;
  int64_t hidden;
  int64_t intermediate;
};

class ExpertStackBlocks : public ::testing::TestWithParam<StackCase> {};

TEST_P(ExpertStackBlocks, ExpertJIsSlicedByRowBytes) {
  const StackCase c = GetParam();
  const int64_t experts = 3, h = c.hidden, i = c.intermediate, rows = 5;
  std::mt19937 rng(20261201);
  std::vector<std::vector<uint8_t>> gate, up, down;
  std::vector<uint8_t> gate_all, up_all, gate_up_all, down_all;
  for (int64_t e = 0; e < experts; ++e) {
    gate.push_back(random_blocks(c.gate_up, i, h, rng));
    up.push_back(random_blocks(c.gate_up, i, h, rng));
    down.push_back(random_blocks(c.down, h, i, rng));
    gate_all.insert(gate_all.end(), gate[e].begin(), gate[e].end());
    up_all.insert(up_all.end(), up[e].begin(), up[e].end());
    gate_up_all.insert(gate_up_all.end(), gate[e].begin(), gate[e].end());
    gate_up_all.insert(gate_up_all.end(), up[e].begin(), up[e].end());
    down_all.insert(down_all.end(), down[e].begin(), down[e].end());
  }
  const ExpertStack fused(tensor_of(gate_up_all, {experts, 2 * i, h}, c.gate_up),
                          tensor_of(down_all, {experts, h, i}, c.down));
  const ExpertStack apart(tensor_of(gate_all, {experts, i, h}, c.gate_up),
                          tensor_of(up_all, {experts, i, h}, c.gate_up),
                          tensor_of(down_all, {experts, h, i}, c.down));
  EXPECT_EQ(fused.dtype(), c.gate_up);
  EXPECT_EQ(fused.down_dtype(), c.down);
  // The same weights dequantized by the reference dequantizer, run in f32.
  std::vector<float> gate_up_f32, down_f32;
  for (int64_t e = 0; e < experts; ++e) {
    for (const auto* part : {&gate[e], &up[e]}) {
      const auto values = dequantized(c.gate_up, *part, i, h);
      gate_up_f32.insert(gate_up_f32.end(), values.begin(), values.end());
    }
    const auto values = dequantized(c.down, down[e], h, i);
    down_f32.insert(down_f32.end(), values.begin(), values.end());
  }
  const auto f32_tensor = [](const std::vector<float>& v, Shape shape) {
    Tensor t = Tensor::zeros(std::move(shape), DType::f32);
    std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
    return t;
  };
  const ExpertStack widened(f32_tensor(gate_up_f32, {experts, 2 * i, h}),
                            f32_tensor(down_f32, {experts, h, i}));
  ThreadPool pool(2);
  std::vector<float> x(static_cast<size_t>(rows * h));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float& v : x) v = unit(rng);
  for (int64_t e = 0; e < experts; ++e) {
    SCOPED_TRACE(e);
    const std::vector<float> want =
        expert_by_hand(x.data(), rows, h, i, gate[e].data(), up[e].data(), c.gate_up,
                       down[e].data(), c.down, pool);
    std::vector<float> got(want.size()), got_apart(want.size()), got_f32(want.size());
    fused.forward(e, x.data(), rows, got.data(), pool);
    apart.forward(e, x.data(), rows, got_apart.data(), pool);
    widened.forward(e, x.data(), rows, got_f32.data(), pool);
    EXPECT_EQ(got, want);
    EXPECT_EQ(got_apart, want);
    EXPECT_LT(relative_l2(got, got_f32), 0.03);
    // Batch invariance: one row alone gives that row of the batch.
    std::vector<float> one(static_cast<size_t>(h));
    fused.forward(e, x.data() + 3 * h, 1, one.data(), pool);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), got.begin() + 3 * h));
  }
  // forward_group (one grouped kernel call per projection for block stacks, expert by expert
  // otherwise) equals forward() of each expert bitwise, with uneven row counts and an idle
  // expert.
  const int64_t counts[] = {2, 0, 5};
  const auto group_equals_forward = [&](const ExpertStack& stack, const ExpertStack& reference) {
    std::vector<ExpertStack::ExpertRows> work;
    std::vector<std::vector<float>> got(experts), want(experts);
    for (int64_t e = 0; e < experts; ++e) {
      const auto size = static_cast<size_t>(counts[e] * h);
      got[e].assign(size, NAN);
      want[e].assign(size, NAN);
      reference.forward(e, x.data(), counts[e], want[e].data(), pool);
      work.push_back({e, x.data(), counts[e], got[e].data()});
    }
    stack.forward_group(work, pool);
    for (int64_t e = 0; e < experts; ++e) EXPECT_EQ(got[e], want[e]) << "expert " << e;
  };
  for (const ExpertStack* stack : {&fused, &apart}) group_equals_forward(*stack, *stack);
  // The same stacks mapped from a file (as a GGUF's are) and repacked for AVX2 / AVX-512 where the
  // type repacks (ExpertStack::repack_blocks; their stored pages dropped): forward_group still
  // equals each expert's forward() on the in-memory stacks bit for bit.
  const std::vector<Tensor> maps = mapped_copies(
      {tensor_of(gate_up_all, {experts, 2 * i, h}, c.gate_up),
       tensor_of(gate_all, {experts, i, h}, c.gate_up),
       tensor_of(up_all, {experts, i, h}, c.gate_up), tensor_of(down_all, {experts, h, i}, c.down)},
      str_cat("experts_", dtype_name(c.gate_up)));
  const Tensor &gate_up_mapped = maps[0], &gate_mapped = maps[1], &up_mapped = maps[2],
               &down_mapped = maps[3];
  ExpertStack fused_mapped(gate_up_mapped, down_mapped);
  ExpertStack apart_mapped(gate_mapped, up_mapped, down_mapped);
  const bool repacks = kernels::repacks_blocks(c.gate_up) && kernels::repacks_blocks(c.down);
  for (ExpertStack* stack : {&fused_mapped, &apart_mapped}) {
    stack->repack_blocks();
    if (repacks) {
      EXPECT_EQ(stack->repacked_parts(), stack == &fused_mapped ? 2 : 3);
    }
    SCOPED_TRACE("mapped");
    group_equals_forward(*stack, fused);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, ExpertStackBlocks,
    ::testing::Values(
        StackCase{DType::q8_0, DType::q8_0, 64, 96}, StackCase{DType::q4_0, DType::q4_0, 64, 96},
        StackCase{DType::q4_1, DType::q4_1, 64, 96}, StackCase{DType::q5_0, DType::q5_0, 64, 96},
        StackCase{DType::q5_1, DType::q5_1, 64, 96}, StackCase{DType::q4_k, DType::q4_k, 256, 256},
        StackCase{DType::q5_k, DType::q5_k, 256, 256},
        StackCase{DType::q6_k, DType::q6_k, 256, 256},
        // llama.cpp's fallback for an intermediate that is not whole 256-blocks
        StackCase{DType::q4_k, DType::q5_0, 256, 96}, StackCase{DType::q6_k, DType::f32, 256, 96}),
    [](const auto& info) {
      return str_cat(dtype_name(info.param.gate_up), "_", dtype_name(info.param.down));
    });

LoadOptions quantized(DType type) {
  LoadOptions options;
  options.quantization = type;
  return options;
}

std::string gguf_py_file(const std::string& type) {
  return model_dir("gguf-models/tiny-deepseek-v2-lite-gguf-py-" + type + ".gguf");
}

TEST(MoeQuantizedExperts, GgufExpertStacksMapZeroCopyInTheirBlockType) {
  const io::Checkpoint gguf = io::Checkpoint::open(gguf_py_file("q8_0"));
  WeightLoader loader(gguf, {});
  const std::string prefix = "model.layers.1.mlp.experts.";
  const Tensor gate = loader.matrix(prefix + "gate_proj", {8, 32, 64}, MatrixUse::expert);
  const Tensor down = loader.matrix(prefix + "down_proj", {8, 64, 32}, MatrixUse::expert);
  EXPECT_EQ(gate.dtype(), DType::q8_0);
  EXPECT_TRUE(gate.is_borrowed());
  EXPECT_EQ(down.dtype(), DType::q8_0);
  EXPECT_TRUE(down.is_borrowed());
  EXPECT_EQ(gate.nbytes(), size_t{8 * 32 * 2 * 34});  // 2 blocks of 34 bytes per row
  // Expert 5 alone, under its Hugging Face name: the stack's bytes from row 5 * 32 on.
  const Tensor five = loader.matrix(prefix + "5.gate_proj.weight", {32, 64}, MatrixUse::expert);
  EXPECT_EQ(five.dtype(), DType::q8_0);
  EXPECT_EQ(five.raw(), static_cast<const std::byte*>(gate.raw()) + 5 * 32 * 2 * 34);
}

class MoeQuantizeAtLoad : public ::testing::TestWithParam<DType> {};

TEST_P(MoeQuantizeAtLoad, ExpertsIncludedEqualsTheGgufPyFileBitForBit) {
  const DType type = GetParam();
  const std::string name(dtype_name(type));
  LoadReport report;
  auto at_load = load_model(model_dir("tiny-deepseek-v2-lite"), quantized(type), &report);
  auto file = load_model(gguf_py_file(name), {});
  // 2 MoE layers x 8 experts x 3 projections now quantized; nothing kept as routed-expert.
  EXPECT_EQ(report.quantization.find("routed-expert"), std::string::npos) << report.quantization;
  EXPECT_NE(report.quantization.find(str_cat("quantized at load to ", name, ": 63 matrices")),
            std::string::npos)
      << report.quantization;
  const nlohmann::json golden = load_golden("tiny-deepseek-v2-lite");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const GenerationRun want = run_greedy(*file, prompt, 2, 0, 3);
    const GenerationRun got = run_greedy(*at_load, prompt, 2, 0, 3);
    EXPECT_EQ(got.logits, want.logits) << name << " prompt of " << prompt.size();
    EXPECT_EQ(got.greedy, want.greedy) << name << " prompt of " << prompt.size();
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MoeQuantizeAtLoad, ::testing::Values(DType::q8_0, DType::q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace deepinfer::model
