#include "io/hf_config.h"

#include <gtest/gtest.h>

#include "test_files.h"

namespace deepinfer::io {
namespace {

using json = nlohmann::json;
using testing::expect_error;
using testing::TempDir;
using testing::write_bytes;

// A Qwen2-0.5B-like config.json (transformers 4.x keys).
json qwen2() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "rope_scaling": null, "tie_word_embeddings": true, "hidden_act": "silu",
    "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151643
  })");
}

void expect_same_rope(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.partial_rotary_factor, b.partial_rotary_factor);
  const RopeScaling &x = a.rope_scaling, &y = b.rope_scaling;
  EXPECT_EQ(x.type, y.type);
  EXPECT_EQ(x.factor, y.factor);
  EXPECT_EQ(x.original_max_position_embeddings, y.original_max_position_embeddings);
  EXPECT_EQ(x.beta_fast, y.beta_fast);
  EXPECT_EQ(x.beta_slow, y.beta_slow);
  EXPECT_EQ(x.mscale, y.mscale);
  EXPECT_EQ(x.mscale_all_dim, y.mscale_all_dim);
  EXPECT_EQ(x.attention_factor, y.attention_factor);
  EXPECT_EQ(x.truncate, y.truncate);
  EXPECT_EQ(x.low_freq_factor, y.low_freq_factor);
  EXPECT_EQ(x.high_freq_factor, y.high_freq_factor);
}

// Replaces (or with null, removes) keys of `base`.
json with(json base, const json& changes) {
  for (const auto& [key, value] : changes.items()) {
    if (value.is_null()) {
      base.erase(key);
    } else {
      base[key] = value;
    }
  }
  return base;
}

void expect_config_error(const json& config, std::vector<std::string> phrases) {
  phrases.insert(phrases.begin(), "cfg.json: ");
  expect_error([&] { ModelConfig::parse(config, "cfg.json"); }, phrases);
}

TEST(HfConfig, Qwen2ValuesAndDefaults) {
  const ModelConfig c = ModelConfig::parse(qwen2(), "cfg.json");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_EQ(c.rope_scaling.factor, 1.0);
  EXPECT_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias.has_value());
  EXPECT_FALSE(c.mlp_bias.has_value());
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151643}));
  EXPECT_EQ(c.raw.at("vocab_size"), 151936);
}

TEST(HfConfig, DefaultsWhenOptionalKeysAreAbsent) {
  const ModelConfig c =
      ModelConfig::parse(json::parse(R"({"model_type": "llama", "vocab_size": 32, "hidden_size": 64,
                      "num_hidden_layers": 2, "num_attention_heads": 4})"),
                         "cfg.json");
  EXPECT_EQ(c.architecture, "");
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 0);
  EXPECT_EQ(c.max_position_embeddings, 0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.torch_dtype, "");
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(HfConfig, Qwen3ExplicitHeadDimAndListEos) {
  const ModelConfig c = ModelConfig::parse(with(qwen2(), {{"hidden_size", 1024},
                                                          {"num_attention_heads", 16},
                                                          {"head_dim", 128},
                                                          {"num_key_value_heads", 8},
                                                          {"attention_bias", false},
                                                          {"mlp_bias", true},
                                                          {"eos_token_id", {151645, 151643}},
                                                          {"dtype", "float32"}}),
                                           "cfg.json");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.attention_bias, false);
  EXPECT_EQ(c.mlp_bias, true);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(c.torch_dtype, "float32");  // 5.x "dtype" wins over 4.x "torch_dtype"
}

// DeepSeek-V2-Lite's rope keys as written by transformers 4.x, and the same config after a
// save_pretrained() round trip through transformers 5.24 (copied from its output).
TEST(HfConfig, YarnFrom4xAnd5xKeysIsIdentical) {
  const json base = with(qwen2(), {{"max_position_embeddings", 163840}});
  const ModelConfig v4 = ModelConfig::parse(
      with(base, json::parse(R"({"rope_theta": 10000, "rope_scaling": {"beta_fast": 32,
           "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
           "original_max_position_embeddings": 4096, "type": "yarn"}})")),
      "cfg.json");
  const ModelConfig v5 = ModelConfig::parse(
      with(base, json::parse(R"({"rope_theta": null, "rope_parameters": {"beta_fast": 32,
           "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
           "original_max_position_embeddings": 4096, "rope_theta": 10000, "rope_type": "yarn",
           "type": "yarn"}})")),
      "cfg.json");
  expect_same_rope(v4, v5);
  EXPECT_EQ(v5.rope_theta, 10000.0);
  EXPECT_EQ(v5.rope_scaling.type, "yarn");
  EXPECT_EQ(v5.rope_scaling.factor, 40.0);
  EXPECT_EQ(v5.rope_scaling.mscale, 0.707);
  EXPECT_EQ(v5.rope_scaling.mscale_all_dim, 0.707);
  EXPECT_EQ(v5.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_FALSE(v5.rope_scaling.attention_factor.has_value());
  EXPECT_TRUE(v5.rope_scaling.truncate);
}

TEST(HfConfig, Llama3From4xAnd5xKeysIsIdentical) {
  const ModelConfig v4 = ModelConfig::parse(
      with(qwen2(), json::parse(R"({"rope_theta": 500000.0, "rope_scaling": {"factor": 8.0,
           "high_freq_factor": 4.0, "low_freq_factor": 1.0,
           "original_max_position_embeddings": 8192, "rope_type": "llama3"}})")),
      "cfg.json");
  const ModelConfig v5 = ModelConfig::parse(
      with(qwen2(), json::parse(R"({"rope_theta": null, "rope_parameters": {"factor": 8.0,
           "high_freq_factor": 4.0, "low_freq_factor": 1.0,
           "original_max_position_embeddings": 8192, "rope_theta": 500000.0,
           "rope_type": "llama3"}})")),
      "cfg.json");
  expect_same_rope(v4, v5);
  EXPECT_EQ(v4.rope_scaling.type, "llama3");
  EXPECT_EQ(v4.rope_scaling.factor, 8.0);
  EXPECT_EQ(v4.rope_scaling.original_max_position_embeddings, 8192);
}

// GLM-4: transformers 4.x keeps partial_rotary_factor at the top level, 5.x moves it inside.
TEST(HfConfig, PartialRotaryFactorFrom4xAnd5xKeysIsIdentical) {
  const ModelConfig v4 = ModelConfig::parse(
      with(qwen2(), {{"partial_rotary_factor", 0.5}, {"rope_theta", 1000000}}), "cfg.json");
  const ModelConfig v5 = ModelConfig::parse(
      with(qwen2(), json::parse(R"({"rope_theta": null, "rope_scaling": null, "rope_parameters":
           {"partial_rotary_factor": 0.5, "rope_theta": 1000000, "rope_type": "default"}})")),
      "cfg.json");
  expect_same_rope(v4, v5);
  EXPECT_EQ(v5.partial_rotary_factor, 0.5);
  EXPECT_EQ(v5.rope_theta, 1e6);
}

TEST(HfConfig, NestedRopeParametersUseFullAttention) {
  const ModelConfig c = ModelConfig::parse(with(qwen2(), json::parse(R"({"rope_parameters": {
           "full_attention": {"rope_theta": 1000000.0, "rope_type": "linear", "factor": 8.0},
           "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}})")),
                                           "cfg.json");
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
}

TEST(HfConfig, YarnOriginalLengthDefaultsToMaxPositions) {
  const ModelConfig c = ModelConfig::parse(
      with(qwen2(), json::parse(R"({"rope_scaling": {"type": "yarn", "factor": 4.0}})")),
      "cfg.json");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
}

TEST(HfConfig, YarnOptionalKeys) {
  const ModelConfig c = ModelConfig::parse(
      with(qwen2(), json::parse(R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
           "attention_factor": 0.8, "beta_fast": 16, "beta_slow": 2, "truncate": false,
           "original_max_position_embeddings": 4096}})")),
      "cfg.json");
  EXPECT_EQ(c.rope_scaling.attention_factor, 0.8);
  EXPECT_EQ(c.rope_scaling.beta_fast, 16.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 2.0);
  EXPECT_FALSE(c.rope_scaling.truncate);
}

TEST(HfConfig, MissingRequiredKeys) {
  for (const char* key :
       {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"}) {
    expect_config_error(with(qwen2(), {{key, nullptr}}), {key, ": missing (required)"});
  }
}

TEST(HfConfig, WrongTypes) {
  expect_config_error(with(qwen2(), {{"vocab_size", "151936"}}),
                      {"vocab_size: expected an integer, got string"});
  expect_config_error(with(qwen2(), {{"intermediate_size", 4864.5}}),
                      {"intermediate_size: expected an integer, got number"});
  expect_config_error(with(qwen2(), {{"tie_word_embeddings", "yes"}}),
                      {"tie_word_embeddings: expected true or false"});
  expect_config_error(with(qwen2(), {{"mlp_bias", 1}}), {"mlp_bias: expected true or false"});
  expect_config_error(with(qwen2(), {{"rms_norm_eps", "1e-6"}}),
                      {"rms_norm_eps: expected a number"});
  expect_config_error(with(qwen2(), {{"hidden_act", 3}}), {"hidden_act: expected a string"});
  expect_config_error(with(qwen2(), {{"eos_token_id", {1, "2"}}}),
                      {"eos_token_id: expected a token id or a list of token ids"});
  expect_config_error(with(qwen2(), {{"architectures", "Qwen2ForCausalLM"}}),
                      {"architectures: expected a non-empty list"});
}

TEST(HfConfig, NonPositiveSizes) {
  expect_config_error(with(qwen2(), {{"hidden_size", 0}}),
                      {"hidden_size: must be positive, got 0"});
  expect_config_error(with(qwen2(), {{"num_hidden_layers", -1}}),
                      {"num_hidden_layers: must be positive, got -1"});
  expect_config_error(with(qwen2(), {{"intermediate_size", 0}}),
                      {"intermediate_size: must be positive"});
  expect_config_error(with(qwen2(), {{"head_dim", 0}}), {"head_dim: must be positive"});
  expect_config_error(with(qwen2(), {{"bos_token_id", -5}}),
                      {"bos_token_id: token id must be non-negative"});
}

TEST(HfConfig, HeadsNotDivisibleByKvHeads) {
  expect_config_error(with(qwen2(), {{"num_key_value_heads", 4}}),
                      {"num_key_value_heads: 4 does not divide num_attention_heads 14"});
}

TEST(HfConfig, HeadDimNotDerivable) {
  expect_config_error(
      with(qwen2(), {{"hidden_size", 900}}),
      {"head_dim: not given, and hidden_size 900 is not divisible by num_attention_heads 14"});
}

TEST(HfConfig, NeitherArchitecturesNorModelType) {
  expect_config_error(with(qwen2(), {{"architectures", nullptr}, {"model_type", nullptr}}),
                      {"architectures: missing, and so is model_type"});
}

TEST(HfConfig, NotAnObject) {
  expect_config_error(json::array(), {"expected a JSON object"});
}

TEST(HfConfig, RopeErrors) {
  expect_config_error(with(qwen2(), {{"rope_scaling", {{"type", "longrope"}, {"factor", 2.0}}}}),
                      {"rope_scaling.type: unsupported RoPE type \"longrope\""});
  expect_config_error(with(qwen2(), {{"rope_scaling", {{"type", "linear"}, {"factr", 2.0}}}}),
                      {"rope_scaling.factr: unknown RoPE setting"});
  expect_config_error(with(qwen2(), {{"rope_scaling", {{"type", "linear"}}}}),
                      {"rope_scaling.factor: missing (required by linear)"});
  expect_config_error(with(qwen2(), {{"rope_scaling", {{"type", "dynamic"}, {"factor", 0}}}}),
                      {"rope_scaling.factor: must be positive"});
  expect_config_error(
      with(qwen2(), {{"rope_scaling",
                      {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0}}}}),
      {"rope_scaling.low_freq_factor: missing (required by llama3)"});
  expect_config_error(
      with(qwen2(),
           {{"rope_scaling", {{"rope_type", "yarn"}, {"type", "linear"}, {"factor", 2.0}}}}),
      {"rope_scaling.type: \"linear\" contradicts rope_type \"yarn\""});
  expect_config_error(with(qwen2(), {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}},
                                     {"rope_parameters", {{"rope_type", "default"}}}}),
                      {"rope_parameters: both rope_scaling", "differ"});
  expect_config_error(
      with(qwen2(), {{"rope_parameters", {{"sliding_attention", {{"rope_type", "default"}}}}}}),
      {"rope_parameters: nested per layer type but has no \"full_attention\""});
  expect_config_error(with(qwen2(), {{"rope_scaling", "yarn"}}),
                      {"rope_scaling: expected an object"});
  expect_config_error(with(qwen2(), {{"partial_rotary_factor", 1.5}}),
                      {"partial_rotary_factor: must be in (0, 1]"});
  expect_config_error(with(qwen2(), {{"rope_theta", -1}}), {"rope_theta: must be positive"});
  expect_config_error(with(qwen2(), {{"max_position_embeddings", nullptr},
                                     {"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}}}}),
                      {"rope_scaling.original_max_position_embeddings: missing"});
}

TEST(HfConfig, LoadReadsConfigJsonAndNamesIt) {
  TempDir dir;
  expect_error([&] { ModelConfig::load(dir.str()); }, {dir.file("config.json"), "cannot open"});
  write_bytes(dir.file("config.json"), "{\"vocab_size\": ");
  expect_error([&] { ModelConfig::load(dir.str()); }, {dir.file("config.json"), "malformed JSON"});
  write_bytes(dir.file("config.json"), with(qwen2(), {{"hidden_size", "x"}}).dump());
  expect_error([&] { ModelConfig::load(dir.str()); },
               {dir.file("config.json") + ": hidden_size: expected an integer"});
  write_bytes(dir.file("config.json"), qwen2().dump());
  EXPECT_EQ(ModelConfig::load(dir.str()).vocab_size, 151936);
}

TEST(GenerationConfig, MissingFileFallsBackToModelConfig) {
  TempDir dir;
  const ModelConfig model = ModelConfig::parse(qwen2(), "cfg.json");
  const GenerationConfig g = GenerationConfig::load(dir.str(), model);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151643}));
  EXPECT_EQ(g.bos_token_id, 151643);
  EXPECT_FALSE(g.do_sample);
  EXPECT_FALSE(g.temperature.has_value());
  EXPECT_FALSE(g.pad_token_id.has_value());
}

// Qwen2.5-Instruct's generation_config.json.
TEST(GenerationConfig, ReadsSamplingDefaultsAndEosList) {
  TempDir dir;
  write_bytes(dir.file("generation_config.json"), R"({
    "bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true,
    "eos_token_id": [151645, 151643], "repetition_penalty": 1.05, "temperature": 0.7,
    "top_p": 0.8, "top_k": 20, "max_new_tokens": 512, "transformers_version": "4.37.0"})");
  const GenerationConfig g = GenerationConfig::load(dir.str(), ModelConfig::parse(qwen2(), "c"));
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(g.pad_token_id, 151643);
  EXPECT_TRUE(g.do_sample);
  EXPECT_EQ(g.temperature, 0.7);
  EXPECT_EQ(g.top_p, 0.8);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_EQ(g.repetition_penalty, 1.05);
  EXPECT_EQ(g.max_new_tokens, 512);
  EXPECT_EQ(g.raw.at("transformers_version"), "4.37.0");
}

TEST(GenerationConfig, NullEosFallsBackToModelConfig) {
  TempDir dir;
  write_bytes(dir.file("generation_config.json"), R"({"eos_token_id": null, "top_k": 0})");
  const GenerationConfig g = GenerationConfig::load(dir.str(), ModelConfig::parse(qwen2(), "c"));
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151643}));
  EXPECT_EQ(g.top_k, 0);
}

TEST(GenerationConfig, MalformedFileIsNamed) {
  TempDir dir;
  const ModelConfig model = ModelConfig::parse(qwen2(), "c");
  const std::string path = dir.file("generation_config.json");
  write_bytes(path, "{\"top_p\": 0.8,");
  expect_error([&] { GenerationConfig::load(dir.str(), model); }, {path, "malformed JSON"});
  write_bytes(path, "[]");
  expect_error([&] { GenerationConfig::load(dir.str(), model); }, {path, "expected a JSON object"});
  write_bytes(path, R"({"top_p": 1.5})");
  expect_error([&] { GenerationConfig::load(dir.str(), model); },
               {path + ": top_p: must be in (0, 1]"});
  write_bytes(path, R"({"eos_token_id": "</s>"})");
  expect_error([&] { GenerationConfig::load(dir.str(), model); },
               {path + ": eos_token_id: expected an integer"});
  write_bytes(path, R"({"do_sample": 1})");
  expect_error([&] { GenerationConfig::load(dir.str(), model); },
               {path + ": do_sample: expected true or false"});
  write_bytes(path, R"({"max_new_tokens": 0})");
  expect_error([&] { GenerationConfig::load(dir.str(), model); },
               {path + ": max_new_tokens: must be positive"});
}

// The loader's checks, on JSON already in memory (the fuzzers' entry point), named by `source`.
TEST(GenerationConfig, ParseNamesTheSourceAndFallsBackToModelIds) {
  const ModelConfig model = ModelConfig::parse(qwen2(), "c");
  const GenerationConfig g = GenerationConfig::parse(json::parse(R"({"top_k": 5})"), "g", model);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151643}));
  EXPECT_EQ(g.bos_token_id, 151643);
  EXPECT_EQ(g.top_k, 5);
  expect_error([&] { GenerationConfig::parse(json::array(), "mem.json", model); },
               {"mem.json: expected a JSON object"});
  expect_error([&] { GenerationConfig::parse(json::parse(R"({"temperature": -1})"), "g", model); },
               {"g: temperature: must be >= 0"});
}

}  // namespace
}  // namespace deepinfer::io
