// The articles' JSON trio: every key mapped, every rejection naming key and file.
#include <gtest/gtest.h>

#include "config/apply.h"
#include "config/recipe_config.h"
#include "config_test_util.h"

namespace deepinfer::config {
namespace {

using testing::expect_config_error;
using testing::parse_infer;
using testing::scratch_dir;
using testing::write_file;

TEST(RecipeJson, EveryInferConfigKeyIsMapped) {
  const RecipeConfig c = parse_infer(R"({
    "model": {"model_path": "/m", "model_type": "qwen3", "vocab_size": 512, "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 256, "rope_theta": 1e6},
    "parallel": {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "expert_parallel_size": 1},
    "kv_cache": {"use_paged_attention": true, "block_size": 32, "max_num_blocks": 77},
    "atb": {"enable_atb_attention": true, "enable_atb_moe": true, "precision_mode": "fp16"},
    "inference": {"max_batch_size": 5, "max_seq_len": 200, "do_sample": true, "temperature": 0.7,
                  "top_p": 0.9, "top_k": 40, "repetition_penalty": 1.1, "max_new_tokens": 9,
                  "seed": 3}})");
  EXPECT_EQ(*c.model_path, "/m");
  EXPECT_EQ(c.model_path.origin, "x/infer_config.json: model.model_path");
  ASSERT_EQ(c.expected.size(), 9u);  // every model.* key but model_path
  EXPECT_EQ(c.expected[0].key, "model_type");
  EXPECT_EQ(c.expected[0].value, "qwen3");
  EXPECT_EQ(c.expected[8].key, "rope_theta");
  EXPECT_EQ(c.expected[8].value.get<double>(), 1e6);
  EXPECT_EQ(c.expected[2].key, "hidden_size");
  EXPECT_EQ(c.expected[2].value, 64);
  EXPECT_EQ(c.expected[2].origin, "x/infer_config.json: model.hidden_size");
  EXPECT_EQ(*c.tensor_parallel_size, 1);
  EXPECT_EQ(*c.expert_parallel_size, 1);
  EXPECT_EQ(*c.block_size, 32);
  EXPECT_EQ(*c.max_num_blocks, 77);
  EXPECT_TRUE(*c.attention_fusion);
  EXPECT_TRUE(*c.moe_fusion);
  EXPECT_EQ(*c.dtype, "f16");
  EXPECT_EQ(*c.max_num_seqs, 5);
  EXPECT_EQ(c.max_num_seqs.origin, "x/infer_config.json: inference.max_batch_size");
  EXPECT_EQ(*c.max_model_len, 200);
  EXPECT_TRUE(*c.do_sample);
  EXPECT_DOUBLE_EQ(*c.temperature, 0.7);
  EXPECT_DOUBLE_EQ(*c.top_p, 0.9);
  EXPECT_EQ(*c.top_k, 40);
  EXPECT_DOUBLE_EQ(*c.repetition_penalty, 1.1);
  EXPECT_EQ(*c.max_new_tokens, 9);
  EXPECT_EQ(*c.seed, 3u);
}

TEST(RecipeJson, PrecisionModesMapToWeightDtypes) {
  EXPECT_EQ(*parse_infer(R"({"atb": {"precision_mode": "bf16"}})").dtype, "bf16");
  EXPECT_EQ(*parse_infer(R"({"atb": {"precision_mode": "FP32"}})").dtype, "f32");
  EXPECT_EQ(*parse_infer(R"({"atb": {"precision_mode": "auto"}})").dtype, "auto");
  expect_config_error([] { parse_infer(R"({"atb": {"precision_mode": "int8"}})"); },
                      {"atb.precision_mode", "\"int8\"", "fp16, bf16, fp32"});
}

TEST(RecipeJson, UnknownKeysAndSectionsNameKeyAndFile) {
  expect_config_error([] { parse_infer(R"({"kv_cache": {"blocksize": 16}})"); },
                      {"x/infer_config.json", "unknown key 'kv_cache.blocksize'", "block_size"});
  expect_config_error([] { parse_infer(R"({"scheduler": {}})"); },
                      {"x/infer_config.json", "unknown section 'scheduler'"});
  expect_config_error([] { parse_infer(R"({"ep_size": 8})"); },
                      {"unknown section 'ep_size'", "ep_config.json"});
  expect_config_error([] { parse_infer(R"({"kv_cache_dtype": "bf16"})"); },
                      {"unknown section 'kv_cache_dtype'", "model_config.json"});
  expect_config_error([] { parse_infer(R"({"block_size": 16})"); },
                      {"unknown section 'block_size'",
                       "expected the sections model, parallel, "
                       "kv_cache, atb and inference",
                       "a key of the section kv_cache"});
  expect_config_error([] { parse_infer(R"({"model": 3})"); }, {"model must be an object"});
  expect_config_error([] { parse_infer("[1]"); }, {"expected a JSON object"});
}

TEST(RecipeJson, WrongTypesNameTheKey) {
  expect_config_error([] { parse_infer(R"({"kv_cache": {"block_size": "16"}})"); },
                      {"kv_cache.block_size", "expected an integer", "string"});
  expect_config_error([] { parse_infer(R"({"kv_cache": {"block_size": 16.5}})"); },
                      {"kv_cache.block_size", "expected an integer"});
  expect_config_error([] { parse_infer(R"({"inference": {"do_sample": 1}})"); },
                      {"inference.do_sample", "expected true or false"});
  expect_config_error([] { parse_infer(R"({"inference": {"temperature": "hot"}})"); },
                      {"inference.temperature", "expected a number"});
  expect_config_error([] { parse_infer(R"({"model": {"model_path": 7}})"); },
                      {"model.model_path", "expected a string"});
}

TEST(RecipeJson, OutOfRangeValuesAreRejected) {
  expect_config_error([] { parse_infer(R"({"kv_cache": {"block_size": 0}})"); },
                      {"kv_cache.block_size = 0", "positive"});
  expect_config_error([] { parse_infer(R"({"kv_cache": {"block_size": 4096}})"); },
                      {"kv_cache.block_size = 4096", "[1, 1024]"});
  expect_config_error([] { parse_infer(R"({"inference": {"top_p": 1.5}})"); },
                      {"inference.top_p = 1.5", "(0, 1]"});
  expect_config_error([] { parse_infer(R"({"inference": {"top_k": -2}})"); },
                      {"inference.top_k = -2"});
  expect_config_error([] { parse_infer(R"({"inference": {"temperature": -1}})"); },
                      {"inference.temperature = -1"});
  expect_config_error([] { parse_infer(R"({"inference": {"repetition_penalty": 0}})"); },
                      {"inference.repetition_penalty = 0"});
  expect_config_error([] { parse_infer(R"({"inference": {"max_batch_size": -4}})"); },
                      {"inference.max_batch_size = -4"});
  expect_config_error([] { parse_infer(R"({"model": {"hidden_size": 0}})"); },
                      {"model.hidden_size = 0"});
}

TEST(RecipeJson, ParallelSizesAreReadAsGiven) {
  // Set-up checks them against each other, mpirun's world and the checkpoint.
  EXPECT_EQ(*parse_infer(R"({"parallel": {"expert_parallel_size": 8}})").expert_parallel_size, 8);
  EXPECT_EQ(*parse_infer(R"({"parallel": {"tensor_parallel_size": 4}})").tensor_parallel_size, 4);
  EXPECT_EQ(*parse_infer(R"({"parallel": {"pipeline_parallel_size": 2}})").pipeline_parallel_size,
            2);
  EXPECT_EQ(*parse_infer(R"({"parallel": {"data_parallel_size": 2}})").data_parallel_size, 2);
  expect_config_error([] { parse_infer(R"({"parallel": {"tensor_parallel_size": 0}})"); },
                      {"x/infer_config.json: parallel.tensor_parallel_size = 0"});
}

TEST(RecipeJson, AttentionFusionSwitchesToTheUnfusedKernels) {
  const RecipeConfig off = parse_infer(R"({"atb": {"enable_atb_attention": false}})");
  EXPECT_FALSE(*off.attention_fusion);
  EXPECT_FALSE(load_options(off).fused_attention);
  EXPECT_TRUE(load_options(parse_infer("{}")).fused_attention);
  RecipeConfig flag;
  apply_override(flag, "enable_atb_attention", "false", "--enable-atb-attention", true);
  EXPECT_FALSE(load_options(flag).fused_attention);
}

TEST(RecipeJson, MemoryAndPlacementKeys) {
  const RecipeConfig c = parse_infer(
      R"({"model": {"mlock": true, "mmap": false, "transparent_huge_pages": false},
          "parallel": {"cpu_mask": "0x3", "cpu_strict": true}})");
  const MemoryOptions memory = memory_options(c);
  EXPECT_TRUE(memory.mlock);
  EXPECT_FALSE(memory.mmap);
  EXPECT_FALSE(memory.huge_pages);
  EXPECT_FALSE(load_options(c).memory.mmap);
  const MemoryOptions defaults = memory_options(parse_infer("{}"));
  EXPECT_TRUE(defaults.mmap && defaults.huge_pages && !defaults.mlock);
  const CpuPlacement strict = cpu_placement(c, 2);
  EXPECT_EQ(strict.of_thread(0), std::vector<int>{0});
  EXPECT_EQ(strict.of_thread(1), std::vector<int>{1});
  expect_config_error([] { parse_infer(R"({"parallel": {"numa": "spread"}})"); },
                      {"parallel.numa", "\"spread\"", "distribute, isolate or numactl"});
  expect_config_error([] { parse_infer(R"({"parallel": {"cpu_mask": "xyz"}})"); },
                      {"parallel.cpu_mask", "not a hex CPU mask"});
  expect_config_error(
      [] {
        cpu_placement(parse_infer(R"({"parallel": {"numa": "isolate", "cpu_mask": "1"}})"), 2);
      },
      {"parallel.numa", "parallel.cpu_mask", "give one of them"});
}

// enable_atb_moe = false selects the per-expert MoE path (A/B runs); paged attention stays.
TEST(RecipeJson, MoeFusionTurnsOffPagedAttentionCannot) {
  EXPECT_FALSE(*parse_infer(R"({"atb": {"enable_atb_moe": false}})").moe_fusion);
  expect_config_error([] { parse_infer(R"({"kv_cache": {"use_paged_attention": false}})"); },
                      {"kv_cache.use_paged_attention = false", "always paged"});
}

TEST(RecipeJson, EpConfig) {
  RecipeConfig c;
  parse_ep_config(c, nlohmann::json::parse(R"({"ep_size": 1, "num_experts": 8, "top_k": 2,
      "expert_parallel_mode": "all_to_all", "communication_dtype": "fp16"})"),
                  "x/ep_config.json");
  EXPECT_EQ(*c.expert_parallel_size, 1);
  ASSERT_EQ(c.expected.size(), 2u);
  EXPECT_EQ(c.expected[0].key, "num_experts");
  EXPECT_EQ(c.expected[1].key, "num_experts_per_tok");
  EXPECT_EQ(c.expected[1].value, 2);
  EXPECT_EQ(*c.communication_dtype, "fp16");

  const auto ep = [](const std::string& text) {
    RecipeConfig r;
    parse_ep_config(r, nlohmann::json::parse(text), "x/ep_config.json");
  };
  RecipeConfig eight;
  parse_ep_config(eight, nlohmann::json::parse(R"({"ep_size": 8})"), "x/ep_config.json");
  EXPECT_EQ(*eight.expert_parallel_size, 8);
  EXPECT_EQ(eight.expert_parallel_size.origin, "x/ep_config.json: ep_size");
  expect_config_error([&] { ep(R"({"ep_size": 0})"); }, {"x/ep_config.json: ep_size = 0"});
  RecipeConfig capped;
  parse_ep_config(capped, nlohmann::json::parse(R"({"capacity_factor": 1.25})"),
                  "x/ep_config.json");
  EXPECT_DOUBLE_EQ(*capped.capacity_factor, 1.25);
  expect_config_error([&] { ep(R"({"capacity_factor": 0})"); },
                      {"x/ep_config.json: capacity_factor = 0", "must be positive"});
  expect_config_error([&] { ep(R"({"expert_parallel_mode": "allgather"})"); },
                      {"expert_parallel_mode = \"allgather\"", "all_to_all"});
  expect_config_error([&] { ep(R"({"communication_dtype": "int8"})"); },
                      {"communication_dtype = \"int8\""});
  expect_config_error([&] { ep(R"({"experts": 8})"); }, {"unknown key 'experts'"});
}

TEST(RecipeJson, ModelConfigKvCache) {
  const auto mc = [](const std::string& text) {
    RecipeConfig r;
    parse_model_config(r, nlohmann::json::parse(text), "x/model_config.json");
    return r;
  };
  const RecipeConfig c = mc(R"({"use_paged_attention": true, "block_size": 16,
      "max_num_blocks": 9, "kv_cache_dtype": "fp32", "enable_kv_cache_quant": false})");
  EXPECT_EQ(*c.kv_cache_dtype, "f32");
  EXPECT_EQ(*c.max_num_blocks, 9);
  EXPECT_EQ(*mc(R"({"kv_cache_dtype": "auto"})").kv_cache_dtype, "auto");
  // Every spelling lands on one canonical name (case-insensitive).
  const std::pair<const char*, const char*> spellings[] = {
      {"float32", "f32"}, {"F32", "f32"},  {"bf16", "bf16"}, {"BFloat16", "bf16"}, {"fp16", "f16"},
      {"float16", "f16"}, {"half", "f16"}, {"f16", "f16"},   {"int8", "int8"},     {"I8", "int8"},
  };
  for (const auto& [given, canonical] : spellings) {
    const RecipeConfig r = mc(str_cat(R"({"kv_cache_dtype": ")", given, R"("})"));
    EXPECT_EQ(*r.kv_cache_dtype, canonical) << given;
    EXPECT_EQ(r.kv_cache_dtype.origin, "x/model_config.json: kv_cache_dtype");
  }
  // 4-bit and fp8 caches are not built: a clear refusal naming what is.
  for (const char* unbuilt : {"int4", "fp8", "fp8_e4m3", "FP8_E5M2"}) {
    expect_config_error([&] { mc(str_cat(R"({"kv_cache_dtype": ")", unbuilt, R"("})")); },
                        {"x/model_config.json: kv_cache_dtype = ", "not built", "bf16", "int8"});
  }
  expect_config_error([&] { mc(R"({"kv_cache_dtype": "f64"})"); },
                      {"kv_cache_dtype = \"f64\"", "expected auto, f32"});
  expect_config_error([&] { mc(R"({"kv_cache_dtype": 16})"); },
                      {"kv_cache_dtype", "expected a string"});
  // int8 quantization against an explicit other dtype: the conflict itself is reported.
  expect_config_error(
      [&] { mc(R"({"kv_cache_dtype": "fp16", "enable_kv_cache_quant": true})"); },
      {"x/model_config.json", "enable_kv_cache_quant = true", "int8", "kv_cache_dtype = \"f16\""});
  expect_config_error([&] { mc(R"({"kv_cache_dtype": "fp32", "enable_kv_cache_quant": true})"); },
                      {"enable_kv_cache_quant = true", "kv_cache_dtype = \"f32\""});
  // Alone, with auto or with int8 it means an int8 cache.
  for (const char* text : {R"({"enable_kv_cache_quant": true})",
                           R"({"kv_cache_dtype": "auto", "enable_kv_cache_quant": true})",
                           R"({"kv_cache_dtype": "i8", "enable_kv_cache_quant": true})"}) {
    const RecipeConfig r = mc(text);
    EXPECT_EQ(*r.kv_cache_dtype, "int8") << text;
    EXPECT_EQ(r.kv_cache_dtype.origin, "x/model_config.json: enable_kv_cache_quant") << text;
  }
  // false asks for nothing: the dtype (or its default) decides.
  EXPECT_FALSE(mc(R"({"enable_kv_cache_quant": false})").kv_cache_dtype.has());
  EXPECT_EQ(*mc(R"({"kv_cache_dtype": "bf16", "enable_kv_cache_quant": false})").kv_cache_dtype,
            "bf16");
}

TEST(RecipeJson, SiblingFilesAreMergedAndConflictsNameBothFiles) {
  const auto dir = scratch_dir("trio");
  const auto infer = write_file(dir / "infer_config.json",
                                R"({"kv_cache": {"block_size": 16, "max_num_blocks": 40}})");
  write_file(dir / "model_config.json", R"({"block_size": 16, "kv_cache_dtype": "auto"})");
  write_file(dir / "ep_config.json", R"({"num_experts": 8, "top_k": 2})");
  const RecipeConfig c = load_recipe(infer);
  EXPECT_EQ(c.source, infer);
  EXPECT_EQ(*c.block_size, 16);
  EXPECT_EQ(*c.max_num_blocks, 40);
  EXPECT_EQ(*c.kv_cache_dtype, "auto");
  EXPECT_EQ(c.expected.size(), 2u);
  // A directory means its infer_config.json.
  EXPECT_EQ(*load_recipe(dir.string()).max_num_blocks, 40);

  write_file(dir / "model_config.json", R"({"block_size": 32})");
  expect_config_error([&] { load_recipe(infer); },
                      {"conflicting values", "infer_config.json: kv_cache.block_size = 16",
                       "model_config.json: block_size = 32"});
  write_file(dir / "model_config.json", "{not json");
  expect_config_error([&] { load_recipe(infer); }, {"model_config.json", "malformed JSON"});
}

TEST(RecipeJson, FileErrors) {
  const auto dir = scratch_dir("files");
  expect_config_error([&] { load_recipe((dir / "missing.json").string()); },
                      {"missing.json", "cannot be opened", "no such file"});
  const auto ep = write_file(dir / "ep_config.json", "{}");
  expect_config_error([&] { load_recipe(ep); }, {"pass the infer_config.json beside it"});
  const auto bad = write_file(dir / "infer_config.json", R"({"model": {)");
  expect_config_error([&] { load_recipe(bad); }, {"infer_config.json", "malformed JSON"});
}

TEST(RecipeJson, NullValuesCountAsUnset) {
  const RecipeConfig c = parse_infer(R"({"kv_cache": {"block_size": null}, "atb": null})");
  EXPECT_FALSE(c.block_size.has());
}

}  // namespace
}  // namespace deepinfer::config
