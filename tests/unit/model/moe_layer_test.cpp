// The MoE feed-forward against a double-precision re-derivation (route -> experts -> weighted
// combine + shared experts), the dense SwiGLU MLP it must reduce to, batch invariance, both
// expert tensor layouts, load statistics, capacity dropping, and expert parallelism over a
// thread-simulated world of two ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "../parallel/thread_communicator.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/layers/gated_mlp.h"
#include "model/layers/moe/dispatch_plan.h"
#include "model/layers/moe/moe_layer.h"

namespace deepinfer::model {
namespace {

constexpr int64_t kHidden = 24;
constexpr int64_t kInter = 20;

// Random tensors written to a temporary checkpoint directory (removed at the end).
class TempCheckpoint {
 public:
  explicit TempCheckpoint(uint32_t seed) : rng_(seed) {
    dir_ = std::filesystem::temp_directory_path() /
           ("deepinfer_moe_" + std::to_string(seed) + "_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  ~TempCheckpoint() { std::filesystem::remove_all(dir_); }

  const std::vector<float>& random(const std::string& name, const Shape& shape, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
    for (float& x : v) x = normal(rng_);
    return put(name, shape, v);
  }
  const std::vector<float>& put(const std::string& name, const Shape& shape, std::vector<float> v) {
    shapes_[name] = shape;
    return values_[name] = std::move(v);
  }
  const std::vector<float>& operator[](const std::string& name) const { return values_.at(name); }

  io::Checkpoint write() const {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, v] : values_) {
      Tensor t = Tensor::zeros(shapes_.at(name), DType::f32);
      std::copy(v.begin(), v.end(), t.data<float>());
      tensors.emplace_back(name, t);
    }
    io::write_safetensors((dir_ / "model.safetensors").string(), tensors);
    return io::Checkpoint::open(dir_.string());
  }

 private:
  std::mt19937 rng_;
  std::filesystem::path dir_;
  std::map<std::string, std::vector<float>> values_;
  std::map<std::string, Shape> shapes_;
};

MoeConfig glm_like_config() {
  MoeConfig c;
  c.hidden = kHidden;
  c.intermediate = kInter;
  c.router = {.num_experts = 8,
              .top_k = 3,
              .scoring = RouterScoring::sigmoid,
              .method = TopkMethod::noaux_tc,
              .n_group = 2,
              .topk_group = 1,
              .norm_topk_prob = true,
              .norm_eps = 1e-20f,
              .routed_scaling_factor = 2.5f};
  c.shared_intermediate = 2 * kInter;
  return c;
}

// Fills `ckpt` with an MoE layer under `prefix` (per-expert tensors, as HF checkpoints store).
void add_moe(TempCheckpoint& ckpt, const std::string& prefix, const MoeConfig& c) {
  const float gain = 1.5f;
  ckpt.random(prefix + ".gate.weight", {c.router.num_experts, kHidden}, 1.0f / std::sqrt(kHidden));
  if (c.router.method == TopkMethod::noaux_tc) {
    ckpt.random(prefix + ".gate.e_score_correction_bias", {c.router.num_experts}, 0.2f);
  }
  for (int64_t e = 0; e < c.router.num_experts; ++e) {
    const std::string p = prefix + ".experts." + std::to_string(e);
    ckpt.random(p + ".gate_proj.weight", {kInter, kHidden}, gain / std::sqrt(kHidden));
    ckpt.random(p + ".up_proj.weight", {kInter, kHidden}, gain / std::sqrt(kHidden));
    ckpt.random(p + ".down_proj.weight", {kHidden, kInter}, gain / std::sqrt(kInter));
  }
  if (c.shared_intermediate > 0) {
    const std::string p = prefix + ".shared_experts";
    ckpt.random(p + ".gate_proj.weight", {c.shared_intermediate, kHidden}, 1.0f);
    ckpt.random(p + ".up_proj.weight", {c.shared_intermediate, kHidden}, 1.0f);
    ckpt.random(p + ".down_proj.weight", {kHidden, c.shared_intermediate}, 0.2f);
  }
}

// down(silu(gate x) * up x) in double.
std::vector<double> swiglu(const TempCheckpoint& w, const std::string& p, const float* x,
                           int64_t inter) {
  const auto& gate = w[p + ".gate_proj.weight"];
  const auto& up = w[p + ".up_proj.weight"];
  const auto& down = w[p + ".down_proj.weight"];
  std::vector<double> act(static_cast<size_t>(inter)), y(kHidden, 0.0);
  for (int64_t i = 0; i < inter; ++i) {
    double g = 0, u = 0;
    for (int64_t c = 0; c < kHidden; ++c) {
      g += double(gate[i * kHidden + c]) * x[c];
      u += double(up[i * kHidden + c]) * x[c];
    }
    act[i] = g / (1.0 + std::exp(-g)) * u;
  }
  for (int64_t o = 0; o < kHidden; ++o)
    for (int64_t i = 0; i < inter; ++i) y[o] += double(down[o * inter + i]) * act[i];
  return y;
}

// The MoE block of modeling_glm4_moe.py / modeling_deepseek_v3.py in double: routing through
// select_experts (tested on its own) on double-computed logits; `keep(t, s)` says whether an
// assignment survives capacity.
std::vector<double> reference(const TempCheckpoint& w, const std::string& prefix,
                              const MoeConfig& c, const std::vector<float>& x, int64_t tokens,
                              std::vector<int64_t>* load = nullptr,
                              const std::function<bool(int64_t, int64_t, int32_t)>& keep = {}) {
  const int64_t n = c.router.num_experts, k = c.router.top_k;
  const auto& gate = w[prefix + ".gate.weight"];
  std::vector<float> logits(static_cast<size_t>(tokens * n));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < n; ++e) {
      double acc = 0;
      for (int64_t h = 0; h < kHidden; ++h)
        acc += double(gate[e * kHidden + h]) * x[t * kHidden + h];
      logits[t * n + e] = static_cast<float>(acc);
    }
  std::vector<float> bias;
  if (c.router.method == TopkMethod::noaux_tc) bias = w[prefix + ".gate.e_score_correction_bias"];
  std::vector<int32_t> experts(static_cast<size_t>(tokens * k));
  std::vector<float> weights(experts.size());
  select_experts(c.router, logits.data(), tokens, bias, experts.data(), weights.data());
  std::vector<double> out(static_cast<size_t>(tokens * kHidden), 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t s = 0; s < k; ++s) {
      const int32_t e = experts[t * k + s];
      if (load) ++(*load)[e];
      if (keep && !keep(t, s, e)) continue;
      const auto y = swiglu(w, prefix + ".experts." + std::to_string(e), &x[t * kHidden], kInter);
      for (int64_t h = 0; h < kHidden; ++h) out[t * kHidden + h] += weights[t * k + s] * y[h];
    }
    if (c.shared_intermediate > 0) {
      const auto y = swiglu(w, prefix + ".shared_experts", &x[t * kHidden], c.shared_intermediate);
      for (int64_t h = 0; h < kHidden; ++h) out[t * kHidden + h] += y[h];
    }
  }
  return out;
}

std::vector<float> random_input(int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * kHidden));
  for (float& v : x) v = normal(rng);
  return x;
}

double rel_max_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    ref = std::max(ref, std::abs(want[i]));
  }
  return diff / ref;
}

std::vector<float> run(const MoeLayer& layer, const std::vector<float>& x, int threads) {
  ThreadPool pool(threads);
  const int64_t tokens = static_cast<int64_t>(x.size()) / kHidden;
  std::vector<float> out(x.size());
  layer.forward(x.data(), tokens, out.data(), pool);
  return out;
}

std::shared_ptr<parallel::Communicator> single() {
  return std::make_shared<parallel::SingleProcessCommunicator>();
}

TEST(MoeLayer, MatchesDoublePrecisionReferenceAndCountsLoad) {
  TempCheckpoint ckpt(1);
  const MoeConfig config = glm_like_config();
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  const auto layer = MoeLayer::load(weights, "mlp", config, single());
  EXPECT_TRUE(weights.unused().empty());

  constexpr int64_t kTokens = 37;
  const auto x = random_input(kTokens, 2);
  std::vector<int64_t> want_load(8, 0);
  const auto want = reference(ckpt, "mlp", config, x, kTokens, &want_load);
  for (int threads : {1, 2}) {
    EXPECT_LE(rel_max_diff(run(*layer, x, threads), want), 1e-5) << threads << " threads";
  }
  // Two forward calls: every expert count doubled; the total is calls x tokens x top_k.
  uint64_t total = 0;
  for (int64_t e = 0; e < 8; ++e) {
    EXPECT_EQ(layer->expert_load()[e], 2u * want_load[e]) << "expert " << e;
    total += layer->expert_load()[e];
  }
  EXPECT_EQ(total, 2u * kTokens * config.router.top_k);
  int used = 0;
  for (int64_t l : want_load) used += l > 0;
  EXPECT_GE(used, 6) << "the sample should spread over most experts";
  EXPECT_EQ(layer->dropped_assignments(), 0u);
  layer->reset_load_stats();
  for (uint64_t l : layer->expert_load()) EXPECT_EQ(l, 0u);
}

// enable_atb_moe = false runs each expert's stored matrices (ExpertStack::forward) instead of
// the grouped job on packed panels: both within f32 rounding of the reference.
TEST(MoeLayer, PerExpertPathMatchesTheReferenceToo) {
  TempCheckpoint ckpt(21);
  MoeConfig config = glm_like_config();
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader fused_weights(checkpoint, {}), per_expert_weights(checkpoint, {});
  const auto fused = MoeLayer::load(fused_weights, "mlp", config, single());
  config.fused_experts = false;
  const auto per_expert = MoeLayer::load(per_expert_weights, "mlp", config, single());
  const auto x = random_input(19, 22);
  const auto want = reference(ckpt, "mlp", config, x, 19);
  EXPECT_LE(rel_max_diff(run(*fused, x, 2), want), 1e-5);
  EXPECT_LE(rel_max_diff(run(*per_expert, x, 2), want), 1e-5);
}

TEST(MoeLayer, SoftmaxGreedyWithoutSharedExpertsMatchesReference) {
  TempCheckpoint ckpt(3);
  MoeConfig config;
  config.hidden = kHidden;
  config.intermediate = kInter;
  config.router = {.num_experts = 6, .top_k = 2, .norm_topk_prob = true};  // Qwen3-MoE
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  const auto layer = MoeLayer::load(weights, "mlp", config, single());
  const auto x = random_input(11, 4);
  EXPECT_LE(rel_max_diff(run(*layer, x, 2), reference(ckpt, "mlp", config, x, 11)), 1e-5);
}

// One expert, top-1: the softmax weight is exactly 1, so the layer is the dense SwiGLU MLP
// bit for bit (the kernels' per-row results do not depend on how rows are grouped).
TEST(MoeLayer, SingleExpertTopOneIsTheDenseMlpBitwise) {
  TempCheckpoint ckpt(5);
  MoeConfig config;
  config.hidden = kHidden;
  config.intermediate = kInter;
  config.router = {.num_experts = 1, .top_k = 1};
  add_moe(ckpt, "moe", config);
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
    const std::string name = std::string("moe.experts.0.") + proj + ".weight";
    const Shape shape = proj[0] == 'd' ? Shape{kHidden, kInter} : Shape{kInter, kHidden};
    ckpt.put(std::string("dense.") + proj + ".weight", shape, ckpt[name]);
  }
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  const auto moe = MoeLayer::load(weights, "moe", config, single());
  // The experts' packed job (or, where nothing packs, the stored matrices) follows the dense
  // MLP's packed Linear chains (packed_experts.h).
  const auto dense = GatedMlp::load(weights, "dense", kHidden, kInter);
  const auto x = random_input(9, 6);
  std::vector<float> want(x.size());
  ThreadPool pool(2);
  dense->forward(x.data(), 9, want.data(), pool);
  EXPECT_EQ(run(*moe, x, 2), want);
}

// A token's output does not depend on which other tokens share its forward call or on the
// thread count: whole batch == one call per token == uneven chunks, bitwise.
TEST(MoeLayer, OutputsAreBatchAndThreadInvariant) {
  TempCheckpoint ckpt(7);
  const MoeConfig config = glm_like_config();
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  const auto layer = MoeLayer::load(weights, "mlp", config, single());
  const auto x = random_input(13, 8);
  const auto whole = run(*layer, x, 1);
  EXPECT_EQ(run(*layer, x, 2), whole);
  for (int64_t chunk : {1, 4}) {
    for (int64_t begin = 0; begin < 13; begin += chunk) {
      const int64_t end = std::min<int64_t>(13, begin + chunk);
      const std::vector<float> part(x.begin() + begin * kHidden, x.begin() + end * kHidden);
      const auto got = run(*layer, part, 2);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), whole.begin() + begin * kHidden))
          << "chunk " << chunk << " at " << begin;
    }
  }
  EXPECT_TRUE(run(*layer, {}, 1).empty());  // an empty batch is fine
}

// transformers 5's fused 3-D expert tensors load (zero-copy) and compute the same bits.
TEST(MoeLayer, FusedExpertTensorsMatchPerExpertTensors) {
  TempCheckpoint per_expert(9);
  const MoeConfig config = glm_like_config();
  add_moe(per_expert, "mlp", config);
  TempCheckpoint fused(10);
  std::vector<float> gate_up, down;
  for (int64_t e = 0; e < 8; ++e) {
    const std::string p = "mlp.experts." + std::to_string(e);
    for (const char* proj : {".gate_proj.weight", ".up_proj.weight"}) {
      const auto& v = per_expert[p + proj];
      gate_up.insert(gate_up.end(), v.begin(), v.end());
    }
    const auto& d = per_expert[p + ".down_proj.weight"];
    down.insert(down.end(), d.begin(), d.end());
  }
  fused.put("mlp.experts.gate_up_proj", {8, 2 * kInter, kHidden}, gate_up);
  fused.put("mlp.experts.down_proj", {8, kHidden, kInter}, down);
  const std::pair<const char*, Shape> rest[] = {
      {"mlp.gate.weight", {8, kHidden}},
      {"mlp.gate.e_score_correction_bias", {8}},
      {"mlp.shared_experts.gate_proj.weight", {2 * kInter, kHidden}},
      {"mlp.shared_experts.up_proj.weight", {2 * kInter, kHidden}},
      {"mlp.shared_experts.down_proj.weight", {kHidden, 2 * kInter}},
  };
  for (const auto& [name, shape] : rest) fused.put(name, shape, per_expert[name]);
  const io::Checkpoint a = per_expert.write();
  const io::Checkpoint b = fused.write();
  WeightLoader wa(a, {}), wb(b, {});
  const auto x = random_input(10, 11);
  EXPECT_EQ(run(*MoeLayer::load(wa, "mlp", config, single()), x, 2),
            run(*MoeLayer::load(wb, "mlp", config, single()), x, 2));
  EXPECT_TRUE(wb.unused().empty());
}

TEST(MoeLayer, Bf16ExpertWeightsStayClose) {
  TempCheckpoint ckpt(12);
  const MoeConfig config = glm_like_config();
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, LoadOptions{DType::bf16});
  const auto layer = MoeLayer::load(weights, "mlp", config, single());
  const auto x = random_input(16, 13);
  const auto want = reference(ckpt, "mlp", config, x, 16);
  const auto got = run(*layer, x, 2);
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  EXPECT_LE(std::sqrt(num / den), 2e-2);
}

TEST(MoeLayer, MissingCorrectionBiasIsAnErrorNamingTheTensor) {
  TempCheckpoint ckpt(14);
  MoeConfig config = glm_like_config();
  config.router.method = TopkMethod::greedy;  // writes no bias
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  try {
    MoeLayer::load(weights, "mlp", glm_like_config(), single());
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.gate.e_score_correction_bias"), std::string::npos)
        << e.what();
  }
}

// Hand-checked: 4 tokens, top-2 over 4 experts, capacity ceil(0.5 x 4 x 2 / 4) = 1.
// Slot 0 first: t0->e0 kept, t1->e0 dropped, t2->e1 kept, t3->e3 kept; then slot 1:
// t0->e1 dropped (e1 full), t1->e2 kept, t2->e0 dropped, t3->e0 dropped.
TEST(MoeDispatchPlan, CapacityDropsInSlotMajorOrder) {
  const int32_t experts[] = {0, 1, 0, 2, 1, 0, 3, 0};
  EXPECT_EQ(expert_capacity(0.5, 4, 2, 4), 1);
  EXPECT_EQ(expert_capacity(1.25, 5, 2, 4), 4);  // ceil(3.125)
  const DispatchPlan plan = plan_dispatch(experts, 4, 2, 4, 1);
  EXPECT_EQ(plan.dropped, 4);
  EXPECT_EQ(plan.order, (std::vector<int32_t>{0, 4, 3, 6}));
  EXPECT_EQ(plan.expert_offsets, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(plan.position, (std::vector<int32_t>{0, -1, -1, 2, 1, -1, 3, -1}));

  const DispatchPlan all = plan_dispatch(experts, 4, 2, 4, std::nullopt);
  EXPECT_EQ(all.dropped, 0);
  EXPECT_EQ(all.order, (std::vector<int32_t>{0, 2, 5, 7, 1, 4, 3, 6}));  // by expert, stable
  EXPECT_EQ(all.expert_offsets, (std::vector<int64_t>{0, 4, 6, 7, 8}));
}

TEST(MoeDispatchPlan, ReceivedRowsGatherAndScatterByExpert) {
  // 2 sources x 2 local experts: source 0 sent expert 0 one row and expert 1 two rows; source 1
  // sent expert 1 one row. Rows (h = 1) are numbered by their place in the received buffer.
  const std::vector<int64_t> counts = {1, 2, 0, 1};
  const ReceivedRows received(counts, 2, 2);
  EXPECT_EQ(received.total(0), 1);
  EXPECT_EQ(received.total(1), 3);
  EXPECT_EQ(received.contiguous(0), 0);
  EXPECT_EQ(received.contiguous(1), -1);  // rows 1, 2 from source 0 and row 3 from source 1
  const float rows[] = {10, 11, 12, 13};
  float group[3] = {};
  received.gather(1, rows, 1, group);
  EXPECT_EQ(std::vector<float>(group, group + 3), (std::vector<float>{11, 12, 13}));
  float out[4] = {};
  received.scatter(1, group, 1, out);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{0, 11, 12, 13}));
  const std::vector<int64_t> one_source = {0, 2};
  EXPECT_EQ(ReceivedRows(one_source, 1, 2).contiguous(1), 0);
}

TEST(MoeLayer, CapacityFactorDropsAssignmentsBeyondCapacity) {
  TempCheckpoint ckpt(15);
  MoeConfig config = glm_like_config();
  config.capacity_factor = 0.75;  // 20 tokens x 3 / 8 x 0.75 -> capacity 6 (mean load 7.5)
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  const auto layer = MoeLayer::load(weights, "mlp", config, single());
  const auto x = random_input(20, 16);
  // The rule restated independently: admit slot-major, tokens in order, 6 per expert.
  std::vector<std::vector<bool>> kept(20, std::vector<bool>(3, true));
  {
    std::vector<int32_t> chosen(60);
    std::vector<int64_t> load(8, 0);
    reference(ckpt, "mlp", config, x, 20, nullptr, [&](int64_t t, int64_t s, int32_t e) {
      chosen[t * 3 + s] = e;
      return true;
    });
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t t = 0; t < 20; ++t) kept[t][s] = load[chosen[t * 3 + s]]++ < 6;
  }
  int dropped = 0;
  for (const auto& row : kept)
    for (bool k : row) dropped += !k;
  ASSERT_GT(dropped, 0) << "the example must actually drop something";
  const auto want = reference(ckpt, "mlp", config, x, 20, nullptr,
                              [&](int64_t t, int64_t s, int32_t) { return kept[t][s]; });
  EXPECT_LE(rel_max_diff(run(*layer, x, 2), want), 1e-5);
  EXPECT_EQ(layer->dropped_assignments(), static_cast<uint64_t>(dropped));

  layer->set_capacity_factor(std::nullopt);  // off again: exact
  EXPECT_LE(rel_max_diff(run(*layer, x, 2), reference(ckpt, "mlp", config, x, 20)), 1e-5);
}

// Experts split over two ranks (rank r holds experts [4r, 4r + 4)), each rank with its own
// tokens: dispatch and combine through the Communicator give bitwise the world-size-1 output.
TEST(MoeLayer, ExpertParallelOverTwoRanksMatchesOneRankBitwise) {
  TempCheckpoint ckpt(17);
  const MoeConfig config = glm_like_config();
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  const auto whole = MoeLayer::load(weights, "mlp", config, single());
  const std::vector<std::vector<float>> inputs = {random_input(5, 18), random_input(9, 19)};

  parallel::testing::ThreadGroup group(2);
  std::vector<std::vector<float>> outputs(2);
  std::vector<std::vector<uint64_t>> loads(2);
  std::vector<size_t> unused(2);
  std::vector<int64_t> bytes(2);
  group.run([&](int rank) {
    WeightLoader local(checkpoint, {});
    auto comm = std::make_shared<parallel::testing::ThreadCommunicator>(group, rank);
    const auto layer = MoeLayer::load(local, "mlp", config, comm);
    EXPECT_EQ(layer->first_local_expert(), 4 * rank);
    EXPECT_EQ(layer->local_experts(), 4);
    outputs[rank] = run(*layer, inputs[rank], 1);
    loads[rank].assign(layer->expert_load().begin(), layer->expert_load().end());
    unused[rank] = local.unused().size();
    for (const auto& [dtype, n] : local.loaded_bytes()) bytes[rank] += n;
  });
  // Each rank read everything but the other rank's experts (3 matrices each).
  int64_t expert_bytes = 0;
  for (int64_t e = 0; e < 4; ++e) {
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      const auto& info = checkpoint.info(str_cat("mlp.experts.", e, ".", proj, ".weight"));
      expert_bytes += static_cast<int64_t>(info.data_end - info.data_begin);
    }
  }
  int64_t whole_bytes = 0;
  for (const auto& [dtype, n] : weights.loaded_bytes()) whole_bytes += n;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(bytes[rank], whole_bytes - expert_bytes) << "rank " << rank;
  }
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(outputs[rank], run(*whole, inputs[rank], 2)) << "rank " << rank;
    // The other rank's 4 experts are its own to read: skipped, not reported as unused.
    EXPECT_EQ(unused[rank], 0u);
  }
  whole->reset_load_stats();
  run(*whole, inputs[0], 1);
  EXPECT_EQ(loads[0],
            std::vector<uint64_t>(whole->expert_load().begin(), whole->expert_load().end()));
}

// Every rank holds the same tokens (replicated attention): each routes its share, and the
// all-gather gives every rank the whole output, bitwise the world-size-1 one; with fewer
// tokens than ranks some shares are empty.
TEST(MoeLayer, ReplicatedTokensOverTwoRanksMatchOneRankBitwise) {
  TempCheckpoint ckpt(23);
  MoeConfig config = glm_like_config();
  add_moe(ckpt, "mlp", config);
  const io::Checkpoint checkpoint = ckpt.write();
  WeightLoader weights(checkpoint, {});
  const auto whole = MoeLayer::load(weights, "mlp", config, single());
  config.replicated_tokens = true;
  for (const int64_t tokens : {int64_t{7}, int64_t{1}}) {
    const std::vector<float> x = random_input(tokens, 29);
    const std::vector<float> want = run(*whole, x, 2);
    parallel::testing::ThreadGroup group(2);
    std::vector<std::vector<float>> outputs(2);
    group.run([&](int rank) {
      WeightLoader local(checkpoint, {});
      auto comm = std::make_shared<parallel::testing::ThreadCommunicator>(group, rank);
      const auto layer = MoeLayer::load(local, "mlp", config, comm);
      outputs[rank] = run(*layer, x, 1);
    });
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(outputs[rank], want) << tokens << " tokens, rank " << rank;
    }
  }
}

}  // namespace
}  // namespace deepinfer::model
