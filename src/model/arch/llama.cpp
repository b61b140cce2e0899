// Llama 2 / 3 / 3.1 / 3.2 (LlamaForCausalLM) and Mistral without a sliding window
// (MistralForCausalLM), after transformers' modeling_llama.py / modeling_mistral.py: the
// shared GQA decoder (SwiGLU MLP, half-split RoPE of any supported rope type, explicit
// head_dim honoured), where
// - attention_bias (default false) gives q/k/v AND o_proj a bias (LlamaAttention);
// - mlp_bias (default false) gives gate/up/down_proj a bias (LlamaMLP).
// Mistral computes what Llama computes with both biases off (its classes hard-code
// bias=False whatever the config says, so those keys are ignored as transformers ignores
// them), plus a sliding-window mask, accepted here only when it masks nothing.
#include <optional>

#include "core/error.h"
#include "io/json_fields.h"
#include "model/arch/families.h"
#include "model/arch/transformer_decoder.h"

namespace deepinfer::model {
namespace {

// Defaults of LlamaConfig / MistralConfig for keys whose generic default (what
// ModelConfig::parse fills in when the key is absent) differs, so that an abridged
// config.json means the model transformers builds from it.
struct FamilyDefaults {
  int64_t max_position_embeddings;
  int64_t intermediate_size;
  std::optional<int64_t> num_key_value_heads;  // absent: num_attention_heads (the generic one)
};

io::ModelConfig with_defaults(io::ModelConfig config, const FamilyDefaults& defaults) {
  const io::JsonFields f(config.raw, config.architecture + " config.json");
  if (!f.has("max_position_embeddings"))
    config.max_position_embeddings = defaults.max_position_embeddings;
  if (!f.has("intermediate_size")) config.intermediate_size = defaults.intermediate_size;
  if (defaults.num_key_value_heads && !f.has("num_key_value_heads")) {
    const int64_t kv_heads = *defaults.num_key_value_heads;
    DI_CHECK(config.num_attention_heads % kv_heads == 0, config.architecture,
             " config.json: num_key_value_heads is absent, so the default ", kv_heads,
             " applies, but it does not divide num_attention_heads ", config.num_attention_heads,
             "; set num_key_value_heads");
    config.num_key_value_heads = kv_heads;
  }
  return config;
}

// transformers lets query i see key j only if i - j < sliding_window (masking_utils'
// sliding_window_overlay); inside the model's context i - j < max_position_embeddings, so
// a window at least that long masks nothing and the model is Llama's. A shorter window
// would need a windowed KV cache and attention, which the engine does not have.
void check_window_covers_context(const io::ModelConfig& config) {
  const std::string source = config.architecture + " config.json";
  const io::JsonFields f(config.raw, source);
  const bool absent = !config.raw.contains("sliding_window");
  if (!absent && !f.has("sliding_window")) return;  // null: no window
  // MistralConfig's default window is 4096: only an explicit null turns it off.
  const int64_t window = absent ? 4096 : *f.positive("sliding_window");
  if (window >= config.max_position_embeddings) return;
  f.fail_key("sliding_window", window,
             absent ? " (MistralConfig's default, the key is absent)" : "",
             " is shorter than max_position_embeddings ", config.max_position_embeddings,
             ": sliding-window attention is not supported (only null or a window covering the "
             "whole context)");
}

}  // namespace

std::unique_ptr<CausalLM> build_llama(const io::ModelConfig& file_config, WeightLoader& weights) {
  const io::ModelConfig config = with_defaults(file_config, {2048, 11008, std::nullopt});
  const bool attention_bias = config.attention_bias.value_or(false);
  const GqaVariant variant{.attention = {.qkv_bias = attention_bias, .o_bias = attention_bias},
                           .mlp_bias = config.mlp_bias.value_or(false)};
  return std::make_unique<TransformerDecoder>(config, weights, gqa_decoder_spec(config, variant));
}

std::unique_ptr<CausalLM> build_mistral(const io::ModelConfig& file_config, WeightLoader& weights) {
  const io::ModelConfig config = with_defaults(file_config, {4096 * 32, 14336, 8});
  check_window_covers_context(config);
  return std::make_unique<TransformerDecoder>(config, weights, gqa_decoder_spec(config, {}));
}

}  // namespace deepinfer::model
