// The MoE exchange options and expert load balancing over thread-simulated ranks: the
// communication dtype rounds what travels and halves its bytes; the capacity factor drops
// the same assignments whatever the number of ranks; redundant experts and online
// re-placement (weights moved between ranks) change no output bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "../parallel/thread_communicator.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/layers/moe/dispatch_plan.h"
#include "model/layers/moe/moe_layer.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

constexpr int64_t kHidden = 16;
constexpr int64_t kInter = 12;
constexpr int64_t kExperts = 8;

// A random MoE layer "mlp" (GLM-4.5 / DeepSeek-V3 routing) in a temporary checkpoint;
// `hot` experts get a large e_score_correction_bias, so most tokens choose them.
class Checkpoint {
 public:
  Checkpoint(uint32_t seed, std::vector<int64_t> hot = {}) {
    dir_ = std::filesystem::temp_directory_path() /
           ("deepinfer_moe_eplb_" + std::to_string(seed) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::mt19937 rng(seed);
    std::vector<std::pair<std::string, Tensor>> tensors;
    const auto random = [&](const std::string& name, const Shape& shape, float scale) {
      std::normal_distribution<float> normal(0.0f, scale);
      Tensor t = Tensor::zeros(shape, DType::f32);
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
      tensors.emplace_back(name, t);
      return t;
    };
    random("mlp.gate.weight", {kExperts, kHidden}, 0.25f);
    Tensor bias = random("mlp.gate.e_score_correction_bias", {kExperts}, 0.1f);
    for (int64_t e : hot) bias.data<float>()[e] += 4.0f;
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string p = "mlp.experts." + std::to_string(e);
      random(p + ".gate_proj.weight", {kInter, kHidden}, 0.3f);
      random(p + ".up_proj.weight", {kInter, kHidden}, 0.3f);
      random(p + ".down_proj.weight", {kHidden, kInter}, 0.3f);
    }
    io::write_safetensors((dir_ / "model.safetensors").string(), tensors);
    checkpoint_ = std::make_unique<io::Checkpoint>(io::Checkpoint::open(dir_.string()));
  }
  ~Checkpoint() { std::filesystem::remove_all(dir_); }
  const io::Checkpoint& get() const { return *checkpoint_; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<io::Checkpoint> checkpoint_;
};

MoeConfig config() {
  MoeConfig c;
  c.hidden = kHidden;
  c.intermediate = kInter;
  c.router = {.num_experts = kExperts,
              .top_k = 3,
              .scoring = RouterScoring::sigmoid,
              .method = TopkMethod::noaux_tc,
              .n_group = 2,
              .topk_group = 2,
              .norm_topk_prob = true,
              .norm_eps = 1e-20f,
              .routed_scaling_factor = 2.5f};
  return c;
}

std::vector<float> random_input(int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * kHidden));
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> run(const MoeLayer& layer, const std::vector<float>& x) {
  ThreadPool pool(1);
  std::vector<float> out(x.size());
  layer.forward(x.data(), static_cast<int64_t>(x.size()) / kHidden, out.data(), pool);
  return out;
}

// Counts the bytes each rank hands to all_to_all_v (what would travel).
class CountingCommunicator : public parallel::testing::ThreadCommunicator {
 public:
  using ThreadCommunicator::ThreadCommunicator;
  void all_to_all_v_bytes(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                          std::span<std::byte> recv, std::span<const int64_t> recv_bytes) override {
    bytes += static_cast<int64_t>(send.size());
    ThreadCommunicator::all_to_all_v_bytes(send, send_bytes, recv, recv_bytes);
  }
  int64_t bytes = 0;
};

// Runs `body(rank, comm)` on `world` thread ranks.
void on_ranks(int world,
              const std::function<void(int, std::shared_ptr<CountingCommunicator>)>& body) {
  parallel::testing::ThreadGroup group(world);
  group.run([&](int rank) { body(rank, std::make_shared<CountingCommunicator>(group, rank)); });
}

double rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
    ref = std::max(ref, static_cast<double>(std::abs(want[i])));
  }
  return diff / ref;
}

// Hand-checked: 2 tokens of this share, top-2 over 4 experts, one slot-0 assignment of
// expert 0 from an earlier rank, capacity 2, expert 0 replicated in slots {0, 4}.
// Slot 0: t0 -> e0 is e0's 2nd (n = 1): kept, replica 1 % 2 -> slot 4; t1 -> e0 (n = 2):
// dropped. Slot 1: t0 -> e1 (n = 0) -> slot 1; t1 -> e2 -> slot 2.
TEST(MoeDispatchPlan, GlobalAdmissionAndReplicaTurnsByHand) {
  const int32_t experts[] = {0, 1, 0, 2};
  std::vector<int64_t> ahead(2 * 4, 0);
  ahead[0 * 4 + 0] = 1;
  const std::vector<std::vector<int64_t>> replicas = {{0, 4}, {1}, {2}, {3}};
  int64_t dropped = 0;
  const auto targets = assign_targets(experts, 2, 2, 4, ahead, 2, replicas, dropped);
  EXPECT_EQ(targets, (std::vector<int32_t>{4, 1, -1, 2}));
  EXPECT_EQ(dropped, 1);
  const DispatchPlan plan = group_by_target(targets.data(), 2, 2, 5);
  EXPECT_EQ(plan.order, (std::vector<int32_t>{1, 3, 0}));
  EXPECT_EQ(plan.expert_offsets, (std::vector<int64_t>{0, 0, 1, 2, 2, 3}));
  EXPECT_EQ(plan.dropped, 1);
}

// Replicated tokens over 2 ranks: f32 rows are exact (bitwise one process); bf16 and f16 rows
// round once each way, within their precision, and carry half the row bytes.
TEST(MoeLayer, CommunicationDtypeRoundsRowsAndHalvesTheirBytes) {
  const Checkpoint ckpt(3);
  const auto x = random_input(12, 4);
  WeightLoader whole_weights(ckpt.get(), {});
  const auto whole = MoeLayer::load(whole_weights, "mlp", config(),
                                    std::make_shared<parallel::SingleProcessCommunicator>());
  const std::vector<float> want = run(*whole, x);
  std::map<parallel::CommunicationDType, std::vector<float>> out;
  std::map<parallel::CommunicationDType, int64_t> bytes;
  for (const auto dtype : {parallel::CommunicationDType::f32, parallel::CommunicationDType::bf16,
                           parallel::CommunicationDType::f16}) {
    std::vector<std::vector<float>> outputs(2);
    std::vector<int64_t> sent(2);
    on_ranks(2, [&](int rank, std::shared_ptr<CountingCommunicator> comm) {
      LoadOptions options;
      options.moe.communication_dtype = dtype;
      WeightLoader weights(ckpt.get(), options);
      MoeConfig c = config();
      c.replicated_tokens = true;
      const auto layer = MoeLayer::load(weights, "mlp", c, comm);
      outputs[rank] = run(*layer, x);
      sent[rank] = comm->bytes;
    });
    EXPECT_EQ(outputs[0], outputs[1]);
    out[dtype] = outputs[0];
    bytes[dtype] = sent[0] + sent[1];
  }
  EXPECT_EQ(out[parallel::CommunicationDType::f32], want);
  // bf16 keeps 8 significant bits (relative rounding <= 2^-9 per element, twice), f16 11.
  const double bf16 = rel_diff(out[parallel::CommunicationDType::bf16], want);
  const double f16 = rel_diff(out[parallel::CommunicationDType::f16], want);
  EXPECT_GT(bf16, 0.0);
  EXPECT_LE(bf16, std::ldexp(1.0, -6));
  EXPECT_GT(f16, 0.0);
  EXPECT_LT(f16, bf16);
  // Besides the rows, each rank sends its 8 slot counts (int64) once: 2 x 64 bytes.
  const int64_t counts = 2 * kExperts * 8;
  const int64_t f32_rows = bytes[parallel::CommunicationDType::f32] - counts;
  EXPECT_GT(f32_rows, 0);
  EXPECT_EQ(bytes[parallel::CommunicationDType::bf16] - counts, f32_rows / 2);
  EXPECT_EQ(bytes[parallel::CommunicationDType::f16] - counts, f32_rows / 2);
}

// capacity_factor over the group's tokens: replicated tokens over 1, 2 and 4 ranks drop the
// same assignments (same count, bitwise the same output); with each rank's own tokens, the
// ranks' shares in rank order are one batch.
TEST(MoeLayer, GlobalCapacityDropsTheSameWhateverTheRanks) {
  const Checkpoint ckpt(5, {0});
  const auto x = random_input(20, 6);
  MoeConfig c = config();
  c.capacity_factor = 0.75;  // 20 x 3 / 8 x 0.75 -> 6 per expert; expert 0 is hot
  WeightLoader whole_weights(ckpt.get(), {});
  const auto whole = MoeLayer::load(whole_weights, "mlp", c,
                                    std::make_shared<parallel::SingleProcessCommunicator>());
  const std::vector<float> want = run(*whole, x);
  ASSERT_GT(whole->dropped_assignments(), 0u);
  for (const int world : {2, 4}) {
    std::vector<std::vector<float>> outputs(static_cast<size_t>(world));
    std::vector<uint64_t> dropped(static_cast<size_t>(world));
    on_ranks(world, [&](int rank, std::shared_ptr<CountingCommunicator> comm) {
      WeightLoader weights(ckpt.get(), {});
      MoeConfig replicated = c;
      replicated.replicated_tokens = true;
      const auto layer = MoeLayer::load(weights, "mlp", replicated, comm);
      outputs[rank] = run(*layer, x);
      dropped[rank] = layer->dropped_assignments();
    });
    for (int rank = 0; rank < world; ++rank) {
      EXPECT_EQ(outputs[rank], want) << world << " ranks, rank " << rank;
      EXPECT_EQ(dropped[rank], whole->dropped_assignments()) << world << " ranks, rank " << rank;
    }
  }
  // Own tokens: rank 0 holds tokens [0, 9), rank 1 [9, 20).
  std::vector<std::vector<float>> outputs(2);
  on_ranks(2, [&](int rank, std::shared_ptr<CountingCommunicator> comm) {
    WeightLoader weights(ckpt.get(), {});
    const auto layer = MoeLayer::load(weights, "mlp", c, comm);
    const auto begin = x.begin() + (rank == 0 ? 0 : 9 * kHidden);
    const auto end = rank == 0 ? x.begin() + 9 * kHidden : x.end();
    outputs[rank] = run(*layer, std::vector<float>(begin, end));
  });
  std::vector<float> joined = outputs[0];
  joined.insert(joined.end(), outputs[1].begin(), outputs[1].end());
  EXPECT_EQ(joined, want);
}

// The EPLB tests run with the checkpoint's f32 experts and with W8A8 experts, whose row
// scales must travel with the int8 weights when experts move between ranks.
class MoeEplbWeights : public ::testing::TestWithParam<const char*> {
 protected:
  static LoadOptions weight_options() {
    LoadOptions options;
    options.quantization = parse_quantization(GetParam());
    return options;
  }
};

// A recorded load making experts 0 and 1 hot, 2 redundant slots over 2 ranks (5 each): the
// placement replicates the hot experts and the output is bitwise one process's.
TEST_P(MoeEplbWeights, RedundantExpertsFromALoadFileChangeNoOutputBit) {
  const Checkpoint ckpt(7, {0, 1});
  const std::string file = ckpt.path("load.json");
  std::ofstream(file) << R"({"format": "deepinfer-eplb-load-v1", "layers": [)"
                      << R"({"name": "mlp", "load": [900, 800, 100, 100, 100, 100, 100, 100]}]})";
  const auto x = random_input(16, 8);
  WeightLoader whole_weights(ckpt.get(), weight_options());
  const auto whole = MoeLayer::load(whole_weights, "mlp", config(),
                                    std::make_shared<parallel::SingleProcessCommunicator>());
  const std::vector<float> want = run(*whole, x);
  std::vector<std::vector<float>> outputs(2);
  std::vector<std::vector<int64_t>> ids(2);
  on_ranks(2, [&](int rank, std::shared_ptr<CountingCommunicator> comm) {
    LoadOptions options = weight_options();
    options.moe.eplb.num_redundant_experts = 2;
    options.moe.eplb.load_file = file;
    WeightLoader weights(ckpt.get(), options);
    MoeConfig c = config();
    c.replicated_tokens = true;
    const auto layer = MoeLayer::load(weights, "mlp", c, comm);
    outputs[rank] = run(*layer, x);
    ids[rank] = layer->local_expert_ids();
  });
  ASSERT_EQ(ids[0].size(), 5u);
  // 900 and 800 per replica beat 100: experts 0 and 1 get the two extra slots, one per rank.
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(std::count(ids[rank].begin(), ids[rank].end(), 0), 1) << "rank " << rank;
    EXPECT_EQ(std::count(ids[rank].begin(), ids[rank].end(), 1), 1) << "rank " << rank;
    EXPECT_EQ(outputs[rank], want) << "rank " << rank;
  }
}

// Online: every 2 forward calls the ranks sum the window's load and re-place; the hot
// experts' weights move between ranks, the measured balancedness rises by more than 0.2
// over the default split, and every call's output stays bitwise one process's.
TEST_P(MoeEplbWeights, OnlineRebalancingMovesWeightsAndChangesNoOutputBit) {
  const Checkpoint ckpt(9, {0, 1});
  std::vector<std::vector<float>> inputs, want;
  WeightLoader whole_weights(ckpt.get(), weight_options());
  const auto whole = MoeLayer::load(whole_weights, "mlp", config(),
                                    std::make_shared<parallel::SingleProcessCommunicator>());
  for (uint32_t call = 0; call < 6; ++call) {
    inputs.push_back(random_input(10, 20 + call));
    want.push_back(run(*whole, inputs.back()));
  }
  std::vector<std::vector<std::vector<float>>> outputs(2);
  std::vector<std::vector<int64_t>> before(2), after(2);
  std::vector<parallel::LayerBalance> balance(2);
  on_ranks(2, [&](int rank, std::shared_ptr<CountingCommunicator> comm) {
    LoadOptions options = weight_options();
    options.moe.eplb.num_redundant_experts = 2;
    options.moe.eplb.interval = 2;
    options.moe.eplb.window = 2;
    WeightLoader weights(ckpt.get(), options);
    MoeConfig c = config();
    c.replicated_tokens = true;
    const auto layer = MoeLayer::load(weights, "mlp", c, comm);
    before[rank] = layer->local_expert_ids();
    for (const auto& x : inputs) outputs[rank].push_back(run(*layer, x));
    after[rank] = layer->local_expert_ids();
    balance[rank] = weights.eplb_state(*comm)->layers().at(0);
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(before[rank], after[rank]) << "rank " << rank;
    EXPECT_GE(balance[rank].rebalances, 1) << "rank " << rank;
    for (size_t call = 0; call < inputs.size(); ++call) {
      EXPECT_EQ(outputs[rank][call], want[call]) << "rank " << rank << ", call " << call;
    }
  }
  EXPECT_EQ(balance[0].placement, balance[1].placement);
  EXPECT_GE(balance[0].balancedness, balance[0].balancedness_default + 0.2)
      << balance[0].balancedness_default << " -> " << balance[0].balancedness;
}

INSTANTIATE_TEST_SUITE_P(Weights, MoeEplbWeights, ::testing::Values("none", "w8a8"));

}  // namespace
}  // namespace deepinfer::model
