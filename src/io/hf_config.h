#pragma once
// Hugging Face config.json / generation_config.json, for every family we serve. Both the
// transformers 4.x keys (rope_theta, rope_scaling{type|rope_type}) and the 5.x key
// (rope_parameters) are accepted. Family-specific keys (MoE, MLA) stay in `raw` and are
// read by the family's builder.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::io {

struct RopeScaling {
  std::string type = "default";  // default | linear | dynamic | yarn | llama3 | longrope ...
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;  // 0 = not given
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  std::optional<double> attention_factor;
  bool truncate = true;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
};

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. "Qwen2ForCausalLM"
  std::string model_type;    // e.g. "qwen2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double partial_rotary_factor = 1.0;
  bool tie_word_embeddings = false;
  std::optional<bool> attention_bias;  // absent: the family's default
  std::optional<bool> mlp_bias;        // Llama's gate/up/down_proj bias; absent: the default
  std::string hidden_act = "silu";
  std::string torch_dtype;  // "float32", "bfloat16", ... ("dtype" in 5.x)
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // int or list in the file
  nlohmann::json raw;                  // the whole file

  // Throws Error "<dir>/config.json: <key>: <problem>" for missing or invalid values.
  static ModelConfig load(const std::string& dir);
  static ModelConfig parse(const nlohmann::json& json, const std::string& source);
};

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;  // merged: generation_config first, else config.json
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  bool do_sample = false;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
  nlohmann::json raw;  // the whole file (empty when there is none); other keys stay here

  // Missing generation_config.json -> defaults from the model config.
  static GenerationConfig load(const std::string& dir, const ModelConfig& model);
  // The file's JSON (`source` names it in errors); unset ids fall back to `model`'s.
  static GenerationConfig parse(const nlohmann::json& json, const std::string& source,
                                const ModelConfig& model);
};

}  // namespace deepinfer::io
