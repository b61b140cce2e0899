// DeepSeek Sparse Attention at the model level (tiny-deepseek-v32, tiny-glm-moe-dsa; the
// transformers goldens themselves are checked in deepseek_golden_test.cpp): below the
// indexer's top-k a sparse model is exactly dense MLA, above it the selection matters, and
// configurations that cannot work are refused by name.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/arch/deepseek.h"
#include "model/golden_test_util.h"

namespace deepinfer::model {
namespace {

using testing::GenerationRun;
using testing::model_dir;
using testing::relative_max_diff;

std::unique_ptr<CausalLM> load_sparse(const std::string& dir) {
  const io::ModelConfig config = io::ModelConfig::load(dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  WeightLoader weights(checkpoint, {});
  return build_deepseek(config, weights, {});
}

// The same checkpoint as DeepSeek-V3 (dense MLA), its indexer tensors left unread.
std::unique_ptr<CausalLM> load_as_dense_v3(const std::string& dir) {
  io::ModelConfig config = io::ModelConfig::load(dir);
  config.architecture = "DeepseekV3ForCausalLM";
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  WeightLoader weights(checkpoint, {});
  for (int64_t i = 0; i < config.num_hidden_layers; ++i)
    weights.skip_prefix("model.layers." + std::to_string(i) + ".self_attn.indexer.");
  return build_deepseek(config, weights, {});
}

std::vector<int32_t> prompt_of(const char* model, const char* name) {
  const nlohmann::json golden = testing::load_golden(model);
  for (const auto& c : golden["cases"])
    if (c["name"] == name) return c["prompt_ids"].get<std::vector<int32_t>>();
  ADD_FAILURE() << "no case " << name;
  return {};
}

TEST(DeepseekSparseAttention, EqualsDenseMlaBitwiseWhileTheContextFitsTheTopK) {
  for (const char* name : {"tiny-deepseek-v32", "tiny-glm-moe-dsa"}) {
    const std::string dir = model_dir(name);
    if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " absent";
    const int64_t topk = io::ModelConfig::load(dir).raw["index_topk"].get<int64_t>();
    const auto prompt = prompt_of(name, "seven_ids");
    ASSERT_LT(static_cast<int64_t>(prompt.size()), topk);
    auto sparse = load_sparse(dir);
    auto dense = load_as_dense_v3(dir);
    // 7 prompt tokens + 1 decoded: every token's context is within the top-k.
    const int64_t new_tokens = topk - static_cast<int64_t>(prompt.size());
    const GenerationRun a = testing::run_greedy(*sparse, prompt, 2, 0, new_tokens);
    const GenerationRun b = testing::run_greedy(*dense, prompt, 2, 0, new_tokens);
    EXPECT_EQ(a.logits, b.logits) << name;
    EXPECT_EQ(a.greedy, b.greedy) << name;
    // Past the top-k the selection leaves positions out, and the logits move.
    const auto longer = prompt_of(name, "chat");
    ASSERT_GT(static_cast<int64_t>(longer.size()), topk);
    const GenerationRun c = testing::run_greedy(*sparse, longer, 2, 0, 1);
    const GenerationRun d = testing::run_greedy(*dense, longer, 2, 0, 1);
    EXPECT_GT(relative_max_diff(c.logits, d.logits), 1e-3) << name;
  }
}

// A copy of a tiny model directory whose config.json is edited by `edit`.
class EditedModel {
 public:
  EditedModel(const std::string& name, const std::function<void(nlohmann::json&)>& edit)
      : dir_(std::filesystem::temp_directory_path() /
             ("deepinfer_dsa_" + std::to_string(::getpid()) + "_" + name)) {
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(model_dir(name), dir_);
    nlohmann::json config = read_json_file((dir_ / "config.json").string());
    edit(config);
    std::ofstream((dir_ / "config.json").string()) << config.dump(1);
  }
  ~EditedModel() { std::filesystem::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

std::string load_error(const std::string& dir) {
  try {
    load_sparse(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeepseekSparseAttention, RefusesConfigurationsThatDoNotFit) {
  if (!std::filesystem::exists(model_dir("tiny-deepseek-v32"))) GTEST_SKIP();
  {
    EditedModel m("tiny-deepseek-v32", [](nlohmann::json& c) { c["index_head_dim"] = 4; });
    const std::string error = load_error(m.dir());
    EXPECT_NE(error.find("index_head_dim"), std::string::npos) << error;
    EXPECT_NE(error.find("4"), std::string::npos) << error;
  }
  {
    EditedModel m("tiny-deepseek-v32", [](nlohmann::json& c) { c["index_topk"] = 0; });
    EXPECT_NE(load_error(m.dir()).find("index_topk"), std::string::npos) << load_error(m.dir());
  }
  {
    // A wrong head count: the indexer's wq_b has another shape.
    EditedModel m("tiny-deepseek-v32", [](nlohmann::json& c) { c["index_n_heads"] = 3; });
    EXPECT_NE(load_error(m.dir()).find("indexer.wq_b"), std::string::npos) << load_error(m.dir());
  }
  {
    EditedModel m("tiny-glm-moe-dsa", [](nlohmann::json& c) {
      c["indexer_types"] = {"shared", "full", "full"};
    });
    EXPECT_NE(load_error(m.dir()).find("indexer_types"), std::string::npos) << load_error(m.dir());
  }
  {
    EditedModel m("tiny-glm-moe-dsa", [](nlohmann::json& c) {
      c["indexer_types"] = {"full", "sparse", "full"};
    });
    EXPECT_NE(load_error(m.dir()).find("indexer_types"), std::string::npos) << load_error(m.dir());
  }
}

TEST(DeepseekSparseAttention, AMissingIndexerTensorIsNamed) {
  if (!std::filesystem::exists(model_dir("tiny-deepseek-v32"))) GTEST_SKIP();
  EditedModel m("tiny-deepseek-v32", [](nlohmann::json&) {});
  const std::string file = m.dir() + "/model.safetensors";
  {
    // Written while the old file is still mapped: the rename leaves the mapping valid.
    const io::Checkpoint checkpoint = io::Checkpoint::open(m.dir());
    std::vector<std::pair<std::string, Tensor>> kept;
    for (const std::string& name : checkpoint.names())
      if (name != "model.layers.1.self_attn.indexer.wk.weight")
        kept.emplace_back(name, checkpoint.get(name));
    io::write_safetensors(file, kept);
  }
  const std::string error = load_error(m.dir());
  EXPECT_NE(error.find("model.layers.1.self_attn.indexer.wk.weight"), std::string::npos) << error;
}

}  // namespace
}  // namespace deepinfer::model
