// --quantization fp8 of routed experts whichever way a 16-bit checkpoint stores them: one
// matrix per expert (<prefix>.<e>.{gate,up,down}_proj.weight), transformers 5's fused stacks
// (<prefix>.gate_up_proj [E, 2I, H], <prefix>.down_proj [E, H, I]) or the 3-D gate / up / down
// form ([E, I, H] each). The expectation is computed here without the loader: each expert's own
// matrix quantized by quantize_fp8_matrix in 128x128 blocks (model/fp8_weights.h). Every layout
// must give exactly those FP8 bytes and scales in every part of the stack, for every placement
// a rank loads (all experts, one expert-parallel run, EPLB replicas out of order), and the
// forward results of the three layouts must be bitwise equal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/fp8_weights.h"
#include "model/layers/moe/expert_stack.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

constexpr int64_t kExperts = 4;
// Past one 128-row / 128-column block in both directions, with partial last blocks.
constexpr int64_t kHidden = 144;
constexpr int64_t kInter = 136;
const char* const kPrefix = "experts";

enum class Layout { per_expert, fused, split_3d };

struct Expert {
  Tensor gate, up, down;  // bf16 [I, H], [I, H], [H, I]
};

Tensor random_bf16(Shape shape, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.2f);
  Tensor t = Tensor::zeros(std::move(shape), DType::f32);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = normal(rng);
  return t.to(DType::bf16);
}

// The matrices stacked along a new first dimension (bf16 bytes concatenated).
Tensor stacked(const std::vector<const Tensor*>& parts, Shape shape) {
  Tensor out = Tensor::zeros(std::move(shape), DType::bf16);
  auto* dst = static_cast<std::byte*>(out.raw());
  for (const Tensor* part : parts) {
    std::memcpy(dst, part->raw(), part->nbytes());
    dst += part->nbytes();
  }
  return out;
}

class Checkpoints {
 public:
  Checkpoints() {
    std::mt19937 rng(7);
    for (int64_t e = 0; e < kExperts; ++e) {
      experts_.push_back({random_bf16({kInter, kHidden}, rng), random_bf16({kInter, kHidden}, rng),
                          random_bf16({kHidden, kInter}, rng)});
    }
    root_ = std::filesystem::temp_directory_path() /
            ("deepinfer_fp8_expert_stacks_" + std::to_string(::getpid()));
    std::vector<std::pair<std::string, Tensor>> per_expert, fused, split;
    std::vector<const Tensor*> gate_up, gates, ups, downs;
    for (int64_t e = 0; e < kExperts; ++e) {
      const Expert& x = experts_[static_cast<size_t>(e)];
      const std::string p = std::string(kPrefix) + "." + std::to_string(e) + ".";
      per_expert.emplace_back(p + "gate_proj.weight", x.gate);
      per_expert.emplace_back(p + "up_proj.weight", x.up);
      per_expert.emplace_back(p + "down_proj.weight", x.down);
      gate_up.insert(gate_up.end(), {&x.gate, &x.up});
      gates.push_back(&x.gate);
      ups.push_back(&x.up);
      downs.push_back(&x.down);
    }
    const std::string p = std::string(kPrefix) + ".";
    const Tensor down = stacked(downs, {kExperts, kHidden, kInter});
    fused.emplace_back(p + "gate_up_proj", stacked(gate_up, {kExperts, 2 * kInter, kHidden}));
    fused.emplace_back(p + "down_proj", down);
    split.emplace_back(p + "gate_proj", stacked(gates, {kExperts, kInter, kHidden}));
    split.emplace_back(p + "up_proj", stacked(ups, {kExperts, kInter, kHidden}));
    split.emplace_back(p + "down_proj", down);
    write(Layout::per_expert, per_expert);
    write(Layout::fused, fused);
    write(Layout::split_3d, split);
  }
  ~Checkpoints() { std::filesystem::remove_all(root_); }
  const io::Checkpoint& checkpoint(Layout layout) const {
    return *checkpoints_[static_cast<size_t>(layout)];
  }
  const Expert& expert(int64_t e) const { return experts_[static_cast<size_t>(e)]; }

 private:
  void write(Layout layout, const std::vector<std::pair<std::string, Tensor>>& tensors) {
    const auto dir = root_ / std::to_string(static_cast<int>(layout));
    std::filesystem::create_directories(dir);
    io::write_safetensors((dir / "model.safetensors").string(), tensors);
    checkpoints_.push_back(std::make_unique<io::Checkpoint>(io::Checkpoint::open(dir.string())));
  }
  std::filesystem::path root_;
  std::vector<Expert> experts_;
  std::vector<std::unique_ptr<io::Checkpoint>> checkpoints_;
};

LoadOptions fp8() {
  LoadOptions options;
  options.quantization = parse_quantization("fp8");
  return options;
}

std::vector<std::byte> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const std::byte*>(t.raw());
  return {p, p + t.nbytes()};
}

std::vector<std::byte> bytes_of(std::span<const std::byte> s) {
  return {s.begin(), s.end()};
}

class Fp8ExpertStacks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { files_ = new Checkpoints(); }
  static void TearDownTestSuite() {
    delete files_;
    files_ = nullptr;
  }
  static Checkpoints* files_;
};
Checkpoints* Fp8ExpertStacks::files_ = nullptr;

const std::vector<int64_t> kPlacements[] = {
    {0, 1, 2, 3},  // one process
    {2, 3},        // expert-parallel rank 1 of 2 (one run of ids)
    {3, 0, 3},     // EPLB: out of order, expert 3 replicated
};

TEST_F(Fp8ExpertStacks, EveryLayoutHoldsEachExpertsOwnFp8BytesAndScales) {
  for (const std::vector<int64_t>& ids : kPlacements) {
    const auto count = static_cast<int64_t>(ids.size());
    for (Layout layout : {Layout::per_expert, Layout::fused, Layout::split_3d}) {
      const std::string where = "layout " + std::to_string(static_cast<int>(layout)) + ", " +
                                std::to_string(count) + " experts from " + std::to_string(ids[0]);
      WeightLoader weights(files_->checkpoint(layout), fp8());
      const ExpertStack stack = ExpertStack::load(weights, kPrefix, kExperts, ids, kHidden, kInter);
      ASSERT_EQ(stack.dtype(), DType::f8_e4m3) << where;
      ASSERT_EQ(stack.down_dtype(), DType::f8_e4m3) << where;
      EXPECT_TRUE(weights.unused().empty()) << where << ": " << weights.unused().front();
      // gate, up, down and their three scale stacks.
      ASSERT_EQ(stack.parts(), 6) << where;
      int64_t want_bytes = 0;
      for (int64_t j = 0; j < count; ++j) {
        const Expert& x = files_->expert(ids[static_cast<size_t>(j)]);
        const Tensor* matrices[3] = {&x.gate, &x.up, &x.down};
        for (int p = 0; p < 3; ++p) {
          const Fp8Matrix want = quantize_fp8_matrix(*matrices[p], 128, 128);
          EXPECT_EQ(bytes_of(stack.expert_bytes(j, p)), bytes_of(want.q))
              << where << ", slot " << j << ", projection " << p;
          EXPECT_EQ(bytes_of(stack.expert_bytes(j, 3 + p)), bytes_of(want.scale))
              << where << ", slot " << j << ", scales of projection " << p;
          want_bytes += static_cast<int64_t>(want.q.nbytes() + want.scale.nbytes());
        }
      }
      // info's count: only the FP8 bytes and their scales (the 16-bit stacks are not held).
      EXPECT_EQ(weights.loaded_bytes().at("f8_e4m3"), want_bytes) << where;
      EXPECT_EQ(weights.loaded_bytes().count("bf16"), 0u) << where;
    }
  }
}

TEST_F(Fp8ExpertStacks, FusedAndSplitStacksComputeWhatPerExpertTensorsDo) {
  std::vector<ExpertStack> stacks;
  for (Layout layout : {Layout::per_expert, Layout::fused, Layout::split_3d}) {
    WeightLoader weights(files_->checkpoint(layout), fp8());
    stacks.push_back(ExpertStack::load(weights, kPrefix, kExperts, 0, kExperts, kHidden, kInter));
  }
  ThreadPool pool(2);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t rows : {1, 5}) {
    std::vector<float> x(static_cast<size_t>(rows * kHidden));
    for (float& v : x) v = normal(rng);
    for (int64_t e = 0; e < kExperts; ++e) {
      std::vector<float> want(x.size());
      stacks[0].forward(e, x.data(), rows, want.data(), pool);
      for (size_t s = 1; s < stacks.size(); ++s) {
        std::vector<float> got(x.size());
        stacks[s].forward(e, x.data(), rows, got.data(), pool);
        EXPECT_EQ(got, want) << "layout " << s << ", expert " << e << ", " << rows << " rows";
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::model
