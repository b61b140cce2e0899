// deepinfer convert writes what the loader holds: a converted q8_0 checkpoint loads zero-copy
// with every tensor byte-identical to quantize-at-load of the source, in 64-byte aligned
// blocks; per-rank shards hold exactly their rank's experts.
#include "convert/converter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "convert/offline_rank.h"
#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"

namespace deepinfer::convert {
namespace {

namespace fs = std::filesystem;

const std::string kData = DEEPINFER_TEST_DATA_DIR;

struct Captured : model::TensorRecorder {
  std::map<std::string, Tensor> tensors;
  void record(const std::string& name, const Tensor& t, model::MatrixUse,
              std::optional<io::TensorSlice>) override {
    tensors[name] = t;
  }
  void record_expert_stack(const std::string&, int64_t, int64_t, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&) override {}
};

// What building the model from `dir` hands out, by name.
Captured load_all(const std::string& dir, model::LoadOptions options) {
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  model::WeightLoader weights(checkpoint, options);
  Captured captured;
  weights.set_recorder(&captured);
  model::build_model(io::ModelConfig::load(dir), weights);
  return captured;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The converted checkpoint's tensors, each byte-identical to what loading the source with
// `at_load` holds.
Captured expect_converted_as_loaded(const ConvertOptions& options,
                                    const model::LoadOptions& at_load) {
  const Captured expected = load_all(options.input_dir, at_load);
  Captured converted = load_all(options.output_dir, {});
  EXPECT_EQ(converted.tensors.size(), expected.tensors.size());
  for (const auto& [name, tensor] : converted.tensors) {
    SCOPED_TRACE(name);
    const auto it = expected.tensors.find(name);
    EXPECT_TRUE(it != expected.tensors.end() && same_bytes(tensor, it->second));
  }
  return converted;
}

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("deepinfer-convert-" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
             std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string out(const std::string& name) const { return (root_ / name).string(); }
  // Test model `model` to out(name) in `precision`, without a progress bar.
  ConvertOptions options_for(const std::string& model, const std::string& name,
                             const std::string& precision) const {
    ConvertOptions options;
    options.input_dir = kData + "/" + model;
    options.output_dir = out(name);
    options.precision = precision;
    options.progress = false;
    return options;
  }
  fs::path root_;
};

TEST_F(ConvertTest, Q8_0LoadsZeroCopyAndEqualsQuantizeAtLoad) {
  const ConvertOptions options = options_for("tiny-qwen3", "q8", "q8_0");
  convert_checkpoint(options);

  model::LoadOptions at_load;
  at_load.quantization = DType::q8_0;
  const Captured converted = expect_converted_as_loaded(options, at_load);
  int64_t blocks = 0;
  for (const auto& [name, tensor] : converted.tensors) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(tensor.is_borrowed()) << "copied at load";
    if (tensor.dtype() == DType::q8_0) {
      ++blocks;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor.raw()) % 64, 0u) << "not 64-byte aligned";
    }
  }
  EXPECT_EQ(blocks, 14);  // 7 projections x 2 layers; embeddings and lm_head stay f32
}

// --quantize_lm_head on a tied model: the embedding (its lm_head) is written in q8_0 (rows of
// 64 are not whole super-blocks), as quantize-at-load holds it.
TEST_F(ConvertTest, QuantizedLmHeadIsWrittenAsItLoads) {
  ConvertOptions options = options_for("tiny-qwen2", "q4-head", "q4_0");
  options.quantize_lm_head = true;
  EXPECT_EQ(convert_checkpoint(options).precision, "q4_0+lm_head");

  model::LoadOptions at_load;
  at_load.quantization = model::with_lm_head(DType::q4_0);
  const Captured converted = expect_converted_as_loaded(options, at_load);
  EXPECT_EQ(converted.tensors.at("model.embed_tokens.weight").dtype(), DType::q8_0);

  options.output_dir = out("w8a8-head");
  options.precision = "w8a8";
  EXPECT_THROW(convert_checkpoint(options), Error);
  EXPECT_FALSE(fs::exists(options.output_dir));
}

TEST_F(ConvertTest, Fp32OfAnF32CheckpointIsTheSameBytes) {
  ConvertOptions options;
  options.input_dir = kData + "/tiny-qwen2";
  options.output_dir = out("f32");
  options.precision = "fp32";
  options.progress = false;
  options.max_shard_bytes = 100000;  // several model-0000k-of-0000n files
  convert_checkpoint(options);
  const io::Checkpoint source = io::Checkpoint::open(options.input_dir);
  const io::Checkpoint converted = io::Checkpoint::open(options.output_dir);
  EXPECT_EQ(converted.names(), source.names());
  for (const auto& name : source.names())
    EXPECT_TRUE(same_bytes(converted.get(name), source.get(name))) << name;
  int shards = 0;
  for (const auto& entry : fs::directory_iterator(options.output_dir))
    shards += entry.path().extension() == ".safetensors";
  EXPECT_GE(shards, 4);
  // The shards, the index, config.json and the 5 other files of the source directory.
  EXPECT_EQ(verify_converted_dir(options.output_dir), shards + 7);
}

TEST_F(ConvertTest, EpShardsHoldExactlyTheirRanksExperts) {
  for (const bool stacked : {false, true}) {
    SCOPED_TRACE(stacked ? "stacked" : "per expert");
    ConvertOptions options;
    options.input_dir = kData + "/tiny-qwen3-moe";
    options.output_dir = out(stacked ? "ep-stacked" : "ep");
    options.precision = "fp32";
    options.ep_size = 2;
    options.moe_optimization = stacked;
    options.progress = false;
    convert_checkpoint(options);
    EXPECT_THROW(io::Checkpoint::open(options.output_dir), Error);  // the top holds no weights
    for (int rank = 0; rank < 2; ++rank) {
      SCOPED_TRACE(rank);
      const std::string dir = options.output_dir + "/rank" + std::to_string(rank);
      const io::Checkpoint shard = io::Checkpoint::open(dir);
      // 8 experts over 2 ranks: rank r holds experts [4r, 4r + 4) of layers 0 and 2.
      for (int layer : {0, 2}) {
        const std::string prefix = "model.layers." + std::to_string(layer) + ".mlp.experts";
        if (stacked) {
          EXPECT_EQ(shard.get(prefix + ".gate_up_proj").shape(), (Shape{4, 64, 64}));
          EXPECT_EQ(shard.get(prefix + ".down_proj").shape(), (Shape{4, 64, 32}));
          EXPECT_EQ(*shard.slice(prefix + ".gate_up_proj"),
                    (io::TensorSlice{0, 4 * rank, 4 * rank + 4, 8}));
          // Expert 4r + 1's gate rows are the source's gate_proj of that expert.
          const io::Checkpoint source = io::Checkpoint::open(options.input_dir);
          const Tensor gate =
              source.get(prefix + "." + std::to_string(4 * rank + 1) + ".gate_proj.weight");
          const Tensor stack = shard.get(prefix + ".gate_up_proj");
          EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(stack.raw()) + 64 * 64 * 4,
                                gate.raw(), gate.nbytes()),
                    0);
        } else {
          for (int e = 0; e < 8; ++e) {
            const std::string name = prefix + "." + std::to_string(e) + ".gate_proj.weight";
            EXPECT_EQ(shard.contains(name), e / 4 == rank) << name;
          }
        }
      }
      // A rank's shard loads as that rank, and only as that rank.
      model::LoadOptions as_rank;
      as_rank.parallel = offline_rank_context(rank, 2);
      const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
      model::WeightLoader weights(checkpoint, as_rank);
      EXPECT_NO_THROW(model::build_model(io::ModelConfig::load(dir), weights));
      if (stacked) {
        model::LoadOptions other;
        other.parallel = offline_rank_context(1 - rank, 2);
        model::WeightLoader wrong(checkpoint, other);
        EXPECT_THROW(model::build_model(io::ModelConfig::load(dir), wrong), Error);
      }
    }
  }
}

TEST_F(ConvertTest, RefusesAnExistingOutputWithoutForceAndReplacesItWithForce) {
  ConvertOptions options;
  options.input_dir = kData + "/tiny-qwen2";
  options.output_dir = out("exists");
  options.precision = "bf16";
  options.progress = false;
  fs::create_directories(options.output_dir);
  EXPECT_THROW(convert_checkpoint(options), Error);
  options.force = true;
  convert_checkpoint(options);
  EXPECT_TRUE(fs::exists(options.output_dir + "/deepinfer_manifest.json"));
  for (const auto& entry : fs::directory_iterator(root_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::convert
