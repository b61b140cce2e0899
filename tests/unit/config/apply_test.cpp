// From a RecipeConfig to engine options, request defaults and checkpoint checks; overrides.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/apply.h"
#include "config/recipe_config.h"
#include "config_test_util.h"

namespace deepinfer::config {
namespace {

using testing::expect_config_error;
using testing::scratch_dir;
using testing::tiny;
using testing::write_file;

RecipeConfig infer(const std::string& text) {
  return testing::parse_infer(text, "i.json");
}

TEST(RecipeOverrides, FlagsWinOverFilesAndAliasesMap) {
  RecipeConfig c = infer(R"({"kv_cache": {"block_size": 16},
                             "inference": {"max_batch_size": 4, "do_sample": false}})");
  apply_override(c, "block_size", "32", "--block-size", true);
  apply_override(c, "max_num_seqs", 9, "--max-num-seqs");
  apply_override(c, "npu_devices", "0,1,2,3", "--npu_devices", true);
  apply_override(c, "dtype", "bf16", "--dtype", true);
  EXPECT_EQ(*c.block_size, 32);
  EXPECT_EQ(c.block_size.origin, "--block-size");
  EXPECT_EQ(*c.max_num_seqs, 9);
  EXPECT_EQ((*c.devices), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(thread_count(c), 4);
  EXPECT_EQ(*c.dtype, "bf16");
  // An explicit temperature decides greedy vs sampling over the file's do_sample.
  apply_override(c, "temperature", "0.8", "--temperature", true);
  EXPECT_TRUE(*c.do_sample);
  EXPECT_DOUBLE_EQ(sampling_defaults(c, {}).temperature, 0.8);
  apply_overrides(c, {{"threads", 2}, {"seed", nullptr}}, "InferenceEngine()");
  EXPECT_EQ(thread_count(c), 2);
  EXPECT_FALSE(c.seed.has());
}

TEST(RecipeOverrides, BadOverridesNameTheSetting) {
  RecipeConfig c;
  expect_config_error(
      [&] {
        apply_overrides(c, {{"blocksize", 16}}, "InferenceEngine()");
      },
      {"InferenceEngine()", "unknown setting 'blocksize'", "block_size"});
  expect_config_error(
      [&] {
        apply_overrides(c, {{"block_size", "16"}}, "InferenceEngine()");
      },
      {"InferenceEngine(): block_size", "expected an integer"});
  expect_config_error([&] { apply_override(c, "block_size", "1x", "--block-size", true); },
                      {"--block-size", "expected an integer, got '1x'"});
  expect_config_error([&] { apply_override(c, "npu_devices", "0,0", "--npu_devices", true); },
                      {"--npu_devices", "listed twice"});
  expect_config_error([&] { apply_override(c, "npu_devices", "0,a", "--npu_devices", true); },
                      {"--npu_devices", "expected an integer"});
  expect_config_error([&] { apply_override(c, "tensor_parallel_size", 0, "--tp"); }, {"--tp = 0"});
  expect_config_error([&] { apply_overrides(c, nlohmann::json::array(), "x"); },
                      {"must be an object"});
  expect_config_error(
      [&] { apply_override(c, "scheduling_policy", "lifo", "--scheduling-policy"); },
      {"--scheduling-policy = \"lifo\"", "fifo or priority"});
  expect_config_error([&] { apply_override(c, "threads", 5000, "--threads"); },
                      {"--threads = 5000", "4096"});
  expect_config_error([&] { apply_override(c, "devices", -1, "--devices"); },
                      {"--devices = -1", "non-negative"});
  expect_config_error([&] { apply_override(c, "devices", true, "--devices"); },
                      {"--devices", "list of integers"});
  expect_config_error([&] { apply_override(c, "max_new_tokens", 0, "--max-new-tokens"); },
                      {"--max-new-tokens = 0", "positive"});
  expect_config_error([&] { apply_override(c, "seed", -3, "--seed"); }, {"--seed = -3"});
  expect_config_error([&] { apply_override(c, "kv_cache_memory", -1.0, "--kv-cache-memory"); },
                      {"--kv-cache-memory = -1.0", "GiB"});
  expect_config_error([&] { apply_override(c, "kv_cache_dtype", "fp8", "--kv-cache-dtype"); },
                      {"--kv-cache-dtype = \"fp8\"", "not built"});
  expect_config_error([&] { apply_override(c, "enable_prefix_caching", "maybe", "--x", true); },
                      {"--x", "expected true or false"});
  expect_config_error([&] { apply_override(c, "temperature", "warm", "--temperature", true); },
                      {"--temperature", "expected a number, got 'warm'"});
  expect_config_error([&] { apply_override(c, "exe_mode", "npugraph_ex", "exe_mode"); },
                      {"exe_mode = \"npugraph_ex\"", "eager"});
  expect_config_error(
      [&] { apply_override(c, "matmul_precision", "fp8", "--matmul-precision", true); },
      {"--matmul-precision = \"fp8\"", "expected f32", "bf16"});
  apply_override(c, "matmul_precision", "BF16", "--matmul-precision", true);
  EXPECT_EQ(*c.matmul_precision, "bf16");
  EXPECT_EQ(c.matmul_precision.origin, "--matmul-precision");
  // An explicit non-int8 dtype set earlier conflicts with int8 quantization.
  apply_override(c, "kv_cache_dtype", "fp32", "--kv-cache-dtype");
  expect_config_error([&] { apply_override(c, "enable_kv_cache_quant", true, "quant"); },
                      {"conflicting values", "quant = true", "--kv-cache-dtype = \"f32\""});
}

TEST(RecipeApply, EngineConfigMapsTheKeys) {
  io::GenerationConfig generation;
  generation.eos_token_ids = {7, 9};
  const RecipeConfig c = infer(R"({"kv_cache": {"block_size": 8, "max_num_blocks": 100},
      "inference": {"max_batch_size": 3, "max_seq_len": 120}})");
  const auto ec = engine_config(c, generation);
  EXPECT_EQ(ec.block_size, 8);
  EXPECT_EQ(ec.max_num_blocks, 100);
  EXPECT_EQ(ec.max_num_seqs, 3);
  EXPECT_EQ(ec.max_model_len, 120);
  EXPECT_EQ(ec.eos_token_ids, (std::vector<int64_t>{7, 9}));
  EXPECT_FALSE(ec.enable_prefix_caching);
  EXPECT_EQ(ec.kv_cache_dtype, DType::f32);  // no kv_cache_dtype: the compute dtype

  // YAML: input_truncated_len + max_new_tokens bound the sequence.
  RecipeConfig y;
  parse_yaml_recipe(y,
                    "data_config:\n  input_truncated_len: 40\nscheduler_config:\n"
                    "  max_new_tokens: 10\n  max_prefill_tokens: 64\n",
                    "r.yaml");
  const auto ey = engine_config(y, generation);
  EXPECT_EQ(ey.max_model_len, 50);
  EXPECT_EQ(ey.max_num_batched_tokens, 64);

  RecipeConfig both = c;
  apply_override(both, "kv_cache_memory", 1.5, "--kv-cache-memory");
  expect_config_error([&] { engine_config(both, generation); },
                      {"kv_cache.max_num_blocks", "--kv-cache-memory", "give one"});
  RecipeConfig fraction = c;
  apply_override(fraction, "mem_fraction_static", 0.5, "--mem-fraction-static");
  expect_config_error([&] { engine_config(fraction, generation); },
                      {"--mem-fraction-static", "kv_cache.max_num_blocks"});
  RecipeConfig tight = y;
  apply_override(tight, "max_model_len", 40, "--max-model-len");
  expect_config_error([&] { engine_config(tight, generation); },
                      {"input_truncated_len = 40", "no room"});
}

// vLLM's derived max_model_len: linear / dynamic scale max_position_embeddings, yarn scales
// original_max_position_embeddings, llama3 already counts in max_position_embeddings.
TEST(RecipeApply, DerivedMaxModelLenFollowsRopeScaling) {
  EXPECT_EQ(derived_max_model_len(io::ModelConfig::load(tiny("tiny-qwen3"))), 256);
  EXPECT_EQ(derived_max_model_len(io::ModelConfig::load(tiny("tiny-qwen2-linear"))), 512);
  EXPECT_EQ(derived_max_model_len(io::ModelConfig::load(tiny("tiny-qwen3-yarn"))), 128);
  EXPECT_EQ(derived_max_model_len(io::ModelConfig::load(tiny("tiny-qwen2-llama3"))), 256);
}

TEST(RecipeApply, MaxModelLenBeyondTheModelIsRefusedUnlessAllowed) {
  const auto model = io::ModelConfig::load(tiny("tiny-qwen3"));
  io::GenerationConfig generation;
  RecipeConfig c;
  apply_override(c, "max_model_len", 256, "--max-model-len");
  EXPECT_NO_THROW(check_max_model_len(c, engine_config(c, generation), model, "m"));
  apply_override(c, "max_model_len", 4096, "--max-model-len");
  expect_config_error(
      [&] { check_max_model_len(c, engine_config(c, generation), model, "m"); },
      {"--max-model-len = 4096", "derived max_model_len 256", "max_position_embeddings = 256",
       "m/config.json", "--allow-long-max-model-len"});
  apply_override(c, "allow_long_max_model_len", true, "--allow-long-max-model-len");
  EXPECT_NO_THROW(check_max_model_len(c, engine_config(c, generation), model, "m"));
  // The YAML's input_truncated_len + max_new_tokens is a max_model_len too.
  RecipeConfig y;
  parse_yaml_recipe(y, "data_config:\n  input_truncated_len: 300\n", "r.yaml");
  expect_config_error([&] { check_max_model_len(y, engine_config(y, generation), model, "m"); },
                      {"input_truncated_len", "812", "256"});
}

TEST(RecipeApply, TestModelMarkerAndVllmSpellings) {
  EXPECT_TRUE(is_test_model(io::ModelConfig::load(tiny("tiny-qwen3"))));
  io::ModelConfig plain = io::ModelConfig::load(tiny("tiny-qwen3"));
  plain.raw.erase("deepinfer_test_model");
  EXPECT_FALSE(is_test_model(plain));
  RecipeConfig c;
  apply_override(c, "gpu_memory_utilization", "0.5", "--gpu-memory-utilization", true);
  EXPECT_EQ(*c.mem_fraction_static, 0.5);
  EXPECT_EQ(c.mem_fraction_static.origin, "--gpu-memory-utilization");
  apply_override(c, "tokenizer", "dir", "--tokenizer", true);
  apply_override(c, "chat_template", "t.jinja", "--chat-template", true);
  apply_override(c, "seed", "5", "--seed", true);
  EXPECT_EQ(*c.tokenizer_path, "dir");
  EXPECT_EQ(*c.chat_template, "t.jinja");
  EXPECT_EQ(engine_config(c, io::GenerationConfig{}).seed, std::optional<uint64_t>(5));
}

TEST(RecipeApply, KvCacheDtypeReachesTheEngineConfig) {
  const io::GenerationConfig generation;
  const auto dtype_of = [&](const RecipeConfig& c) {
    return engine_config(c, generation).kv_cache_dtype;
  };
  const std::pair<const char*, DType> cases[] = {{"auto", DType::f32},
                                                 {"fp32", DType::f32},
                                                 {"bfloat16", DType::bf16},
                                                 {"half", DType::f16},
                                                 {"int8", DType::i8}};
  for (const auto& [name, dtype] : cases) {
    RecipeConfig c;
    apply_override(c, "kv_cache_dtype", name, "--kv-cache-dtype", true);
    EXPECT_EQ(dtype_of(c), dtype) << name;
  }
  // enable_kv_cache_quant: true is int8; a later flag wins over the file's quantization.
  RecipeConfig quant;
  parse_model_config(quant, nlohmann::json::parse(R"({"enable_kv_cache_quant": true})"), "m.json");
  EXPECT_EQ(dtype_of(quant), DType::i8);
  apply_override(quant, "kv_cache_dtype", "bf16", "--kv-cache-dtype", true);
  EXPECT_EQ(dtype_of(quant), DType::bf16);
  EXPECT_EQ(quant.kv_cache_dtype.origin, "--kv-cache-dtype");
  RecipeConfig flag;
  apply_override(flag, "enable_kv_cache_quant", "true", "--quant", true);
  EXPECT_EQ(dtype_of(flag), DType::i8);
}

TEST(RecipeApply, SamplingDefaults) {
  io::GenerationConfig generation;
  generation.do_sample = true;
  generation.temperature = 0.6;
  generation.top_k = 20;
  generation.max_new_tokens = 64;
  // generation_config.json alone.
  auto p = sampling_defaults(RecipeConfig{}, generation);
  EXPECT_DOUBLE_EQ(p.temperature, 0.6);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.max_new_tokens, 64);
  // Nothing anywhere: greedy, kDefaultMaxNewTokens.
  p = sampling_defaults(RecipeConfig{}, io::GenerationConfig{});
  EXPECT_EQ(p.temperature, 0.0);
  EXPECT_EQ(p.max_new_tokens, kDefaultMaxNewTokens);
  // The config wins.
  p = sampling_defaults(infer(R"({"inference": {"do_sample": true, "temperature": 0.7,
      "top_p": 0.95, "top_k": 50, "repetition_penalty": 1.1, "max_new_tokens": 5, "seed": 4}})"),
                        generation);
  EXPECT_DOUBLE_EQ(p.temperature, 0.7);
  EXPECT_DOUBLE_EQ(p.top_p, 0.95);
  EXPECT_EQ(p.top_k, 50);
  EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.1);
  EXPECT_EQ(p.max_new_tokens, 5);
  EXPECT_EQ(p.seed, 4u);
  // do_sample false makes it greedy over generation_config's sampling.
  p = sampling_defaults(infer(R"({"inference": {"do_sample": false}})"), generation);
  EXPECT_EQ(p.temperature, 0.0);
  EXPECT_EQ(p.top_k, 0);

  expect_config_error(
      [&] {
        sampling_defaults(infer(R"({"inference": {"do_sample": false, "temperature": 0.7}})"),
                          generation);
      },
      {"inference.temperature = 0.7", "has no effect", "inference.do_sample = false"});
  expect_config_error(
      [&] {
        sampling_defaults(infer(R"({"inference": {"do_sample": false, "top_p": 0.5}})"),
                          generation);
      },
      {"inference.top_p = 0.5", "has no effect"});
  expect_config_error(
      [&] {
        sampling_defaults(infer(R"({"inference": {"do_sample": true, "temperature": 0}})"),
                          generation);
      },
      {"inference.temperature = 0 means greedy", "do_sample = true"});
}

TEST(RecipeApply, CheckpointMismatchesNameTheKey) {
  const io::ModelConfig qwen3 = io::ModelConfig::load(tiny("tiny-qwen3"));
  RecipeConfig ok = infer(R"({"model": {"model_type": "qwen3", "vocab_size": 512,
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
      "rope_theta": 1000000}})");
  check_checkpoint(ok, qwen3, "tiny-qwen3");  // rope_theta from transformers 5 rope_parameters

  expect_config_error(
      [&] { check_checkpoint(infer(R"({"model": {"hidden_size": 4096}})"), qwen3, "tiny-qwen3"); },
      {"i.json: model.hidden_size = 4096", "tiny-qwen3/config.json has hidden_size = 64"});
  expect_config_error(
      [&] {
        check_checkpoint(infer(R"({"model": {"model_type": "deepseek_v2"}})"), qwen3, "tiny-qwen3");
      },
      {"model.model_type = \"deepseek_v2\"", "model_type = \"qwen3\""});
  expect_config_error(
      [&] { check_checkpoint(infer(R"({"model": {"rope_theta": 10000}})"), qwen3, "tiny-qwen3"); },
      {"model.rope_theta", "rope_theta = 1000000"});

  RecipeConfig experts;
  parse_ep_config(experts, nlohmann::json::parse(R"({"num_experts": 8, "top_k": 2})"), "ep.json");
  expect_config_error([&] { check_checkpoint(experts, qwen3, "tiny-qwen3"); },
                      {"ep.json: num_experts = 8", "dense model"});
  const io::ModelConfig moe = io::ModelConfig::load(tiny("tiny-qwen3-moe"));
  EXPECT_EQ(routed_experts(moe), 8);
  EXPECT_EQ(experts_per_token(moe), 2);
  check_checkpoint(experts, moe, "tiny-qwen3-moe");
  RecipeConfig wrong_k;
  parse_ep_config(wrong_k, nlohmann::json::parse(R"({"top_k": 6})"), "ep.json");
  expect_config_error([&] { check_checkpoint(wrong_k, moe, "m"); },
                      {"ep.json: top_k = 6", "num_experts_per_tok = 2"});
  const io::ModelConfig deepseek = io::ModelConfig::load(tiny("tiny-deepseek-v2"));
  EXPECT_GT(routed_experts(deepseek), 0);  // n_routed_experts
}

TEST(RecipeApply, ModelPathResolution) {
  const auto dir = scratch_dir("paths");
  std::filesystem::create_directories(dir / "sub" / "model");
  RecipeConfig c;
  c.source = write_file(dir / "sub" / "infer_config.json", "{}");
  apply_override(c, "model_path", "model", "cfg");
  EXPECT_EQ(resolve_model_path(c), (dir / "sub" / "model").string());  // beside the config
  apply_override(c, "model_path", tiny("tiny-qwen3"), "cfg");
  EXPECT_EQ(resolve_model_path(c), tiny("tiny-qwen3"));
  apply_override(c, "model_path", "nowhere", "i.json: model.model_path");
  expect_config_error([&] { resolve_model_path(c); },
                      {"i.json: model.model_path = \"nowhere\"", "no such directory"});
  expect_config_error([] { resolve_model_path(RecipeConfig{}); }, {"no model", "--model DIR"});
}

TEST(RecipeApply, LoadOptionsAndThreads) {
  RecipeConfig c;
  EXPECT_FALSE(load_options(c).weight_dtype.has_value());
  EXPECT_EQ(thread_count(c), 0);
  apply_override(c, "precision_mode", "fp16", "x");
  EXPECT_EQ(load_options(c).weight_dtype, DType::f16);
  apply_override(c, "devices", nlohmann::json::array({4, 5}), "x");
  EXPECT_EQ(thread_count(c), 2);
  apply_override(c, "threads", 3, "x");
  EXPECT_EQ(thread_count(c), 3);  // --threads wins over the device count
}

}  // namespace
}  // namespace deepinfer::config
