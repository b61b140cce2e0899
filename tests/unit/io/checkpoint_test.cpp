#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "test_files.h"

namespace deepinfer::io {
namespace {

using testing::expect_error;
using testing::TempDir;
using testing::write_bytes;

Tensor iota(Shape shape, float start) {
  Tensor t = Tensor::zeros(std::move(shape), DType::f32);
  float v = start;
  for (float& x : t.span<float>()) x = v++;
  return t;
}

const char* kIndex = R"({
  "metadata": {"total_size": 72},
  "weight_map": {
    "model.embed.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00001-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors"
  }
})";

// Two shards matching kIndex: embed [3,4] + norm [4] in shard 1, lm_head [2,4] in shard 2.
void write_two_shards(const TempDir& dir) {
  write_safetensors(
      dir.file("model-00001-of-00002.safetensors"),
      {{"model.embed.weight", iota({3, 4}, 0)}, {"model.norm.weight", iota({4}, 100)}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                    {{"lm_head.weight", iota({2, 4}, 200)}});
}

TEST(Checkpoint, SingleFile) {
  TempDir dir;
  write_safetensors(dir.file("model.safetensors"), {{"b", iota({2}, 5)}, {"a", iota({3}, 1)}});
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ckpt.total_bytes(), 20u);
  EXPECT_EQ(ckpt.get("b").span<float>()[1], 6.0f);
  EXPECT_TRUE(ckpt.get("a").is_borrowed());
}

TEST(Checkpoint, TwoShardsThroughTheIndex) {
  TempDir dir;
  write_two_shards(dir);
  write_bytes(dir.file("model.safetensors.index.json"), kIndex);
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"lm_head.weight", "model.embed.weight",
                                                    "model.norm.weight"}));
  EXPECT_EQ(ckpt.total_bytes(), 96u);
  const Tensor embed = ckpt.get("model.embed.weight");
  EXPECT_EQ(embed.shape(), (Shape{3, 4}));
  EXPECT_EQ(embed.span<float>()[11], 11.0f);
  EXPECT_EQ(ckpt.get("model.norm.weight").span<float>()[3], 103.0f);
  const Tensor head = ckpt.get("lm_head.weight");
  EXPECT_EQ(head.span<float>()[7], 207.0f);
  EXPECT_TRUE(head.is_borrowed());
  EXPECT_EQ(ckpt.info("lm_head.weight").shape, (Shape{2, 4}));
  EXPECT_TRUE(ckpt.contains("model.norm.weight"));
  EXPECT_FALSE(ckpt.contains("model.norm.bias"));
}

TEST(Checkpoint, UnknownTensorNamesDirectoryAndTensor) {
  TempDir dir;
  write_safetensors(dir.file("model.safetensors"), {{"a", iota({3}, 1)}});
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  expect_error([&] { ckpt.get("model.layers.0.mlp"); }, {dir.str(), "\"model.layers.0.mlp\""});
  expect_error([&] { ckpt.info("x"); }, {dir.str(), "no tensor named \"x\""});
}

TEST(Checkpoint, MissingShardIsNamed) {
  TempDir dir;
  write_two_shards(dir);
  std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
  write_bytes(dir.file("model.safetensors.index.json"), kIndex);
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.file("model.safetensors.index.json"),
                "shard \"model-00002-of-00002.safetensors\"", "does not exist"});
}

TEST(Checkpoint, TensorMissingFromTheShardTheIndexNames) {
  TempDir dir;
  write_two_shards(dir);
  std::string index = kIndex;
  index.replace(index.find("\"lm_head.weight\""), 16, "\"lm_head.bias\"");
  write_bytes(dir.file("model.safetensors.index.json"), index);
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.file("model.safetensors.index.json"), "tensor \"lm_head.bias\"",
                "listed in shard \"model-00002-of-00002.safetensors\"", "has no such tensor"});
}

TEST(Checkpoint, TensorInTwoShards) {
  TempDir dir;
  write_two_shards(dir);
  write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                    {{"lm_head.weight", iota({2, 4}, 0)}, {"model.norm.weight", iota({4}, 0)}});
  write_bytes(dir.file("model.safetensors.index.json"), kIndex);
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.str(), "tensor \"model.norm.weight\" appears in two shards",
                "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
}

TEST(Checkpoint, MalformedIndexJson) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"), "{\"weight_map\": {");
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.file("model.safetensors.index.json"), "malformed JSON"});
}

TEST(Checkpoint, IndexWithoutWeightMap) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"), R"({"metadata": {}})");
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.file("model.safetensors.index.json"), "missing \"weight_map\""});
}

TEST(Checkpoint, WeightMapOfWrongType) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": ["a"]})");
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.file("model.safetensors.index.json"), "\"weight_map\" must be an object"});
}

TEST(Checkpoint, WeightMapValueNotAString) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": 1}})");
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.file("model.safetensors.index.json"), "tensor \"a\" must map to a shard"});
}

TEST(Checkpoint, ShardOutsideTheDirectoryIsRejected) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"),
              R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.file("model.safetensors.index.json"), "not a file name inside"});
}

TEST(Checkpoint, BadShardFileNamesTheShard) {
  TempDir dir;
  write_bytes(dir.file("s1.safetensors"), "garbage");
  write_bytes(dir.file("model.safetensors.index.json"),
              R"({"weight_map": {"a": "s1.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir.str()); }, {dir.file("s1.safetensors"), "too short"});
}

TEST(Checkpoint, DirectoryWithoutCheckpoint) {
  TempDir dir;
  write_bytes(dir.file("config.json"), "{}");
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.str(), "no model.safetensors or model.safetensors.index.json"});
}

TEST(Checkpoint, PytorchBinIsNotSupportedYet) {
  TempDir dir;
  write_bytes(dir.file("pytorch_model.bin"), "pickle");
  expect_error([&] { Checkpoint::open(dir.str()); },
               {dir.str(), "pytorch_model.bin", "not supported", "convert"});
}

TEST(Checkpoint, NotADirectory) {
  TempDir dir;
  expect_error([&] { Checkpoint::open(dir.file("nope")); }, {dir.file("nope"), "not a directory"});
}

}  // namespace
}  // namespace deepinfer::io
