#include "session.h"

#include "config/recipe_config.h"

namespace deepinfer::python {

config::RecipeConfig Session::recipe(const std::optional<std::string>& config_path,
                                     const std::optional<std::string>& model_path,
                                     const nlohmann::json& overrides) {
  if (!config_path && !model_path) {
    throw ArgumentError(
        "InferenceEngine: give config_path (an infer_config.json or .yaml recipe) or "
        "model_path (a checkpoint directory)");
  }
  config::RecipeConfig config;
  if (config_path) config = config::load_recipe(*config_path);
  if (model_path) config::apply_override(config, "model_path", *model_path, "model_path");
  config::apply_overrides(config, overrides, "InferenceEngine()");
  return config;
}

std::unique_ptr<Session> Session::start(const config::RecipeConfig& recipe) {
  auto session = std::unique_ptr<Session>(new Session());
  session->runtime_ = config::Runtime::start(recipe);
  return session;
}

std::vector<int32_t> Session::encode_text(const std::string& prompt) const {
  if (prompt.empty()) throw ArgumentError("prompt must not be empty");
  auto ids = runtime_->encode_prompt(prompt);
  if (ids.empty()) throw ArgumentError("the prompt encodes to no tokens");
  return ids;
}

std::vector<int32_t> Session::encode_messages(const nlohmann::ordered_json& messages,
                                              const nlohmann::ordered_json& template_kwargs) const {
  if (!messages.is_array() || messages.empty()) {
    throw ArgumentError(
        "messages must be a non-empty list of {\"role\": ..., \"content\": ...} dicts");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      throw ArgumentError(str_cat("messages[", i,
                                  "] must be a dict with a string \"role\" (and "
                                  "usually \"content\"), got ",
                                  m.dump()));
    }
  }
  if (!template_kwargs.is_null() && !template_kwargs.is_object()) {
    throw ArgumentError("chat_template_kwargs must be a dict, e.g. {\"enable_thinking\": False}");
  }
  if (!runtime_->has_chat_template()) {
    throw ArgumentError(str_cat(runtime_->model_dir(),
                                " has no chat template (tokenizer_config.json): use generate() "
                                "with a plain prompt"));
  }
  return runtime_->encode_chat(messages, template_kwargs);
}

engine::SamplingParams Session::params_for(const std::vector<int32_t>& prompt,
                                           const CallOptions& o) const {
  engine::SamplingParams p = runtime_->sampling_defaults();
  if (o.max_new_tokens) {
    if (*o.max_new_tokens <= 0) {
      throw ArgumentError(
          str_cat("max_new_tokens must be a positive integer, got ", *o.max_new_tokens));
    }
    p.max_new_tokens = *o.max_new_tokens;
  }
  if (o.temperature) {
    if (!(*o.temperature >= 0)) {
      throw ArgumentError(str_cat("temperature must be >= 0 (0 is greedy), got ", *o.temperature));
    }
    p.temperature = *o.temperature;
  }
  if (o.top_p) {
    if (!(*o.top_p > 0 && *o.top_p <= 1)) {
      throw ArgumentError(str_cat("top_p must be in (0, 1], got ", *o.top_p));
    }
    p.top_p = *o.top_p;
  }
  if (o.top_k) {
    if (*o.top_k < -1)
      throw ArgumentError(str_cat("top_k must be >= 1 (0 or -1: off), got ", *o.top_k));
    p.top_k = *o.top_k;
  }
  if (o.repetition_penalty) {
    if (!(*o.repetition_penalty > 0)) {
      throw ArgumentError(
          str_cat("repetition_penalty must be > 0 (1: none), got ", *o.repetition_penalty));
    }
    p.repetition_penalty = *o.repetition_penalty;
  }
  for (const auto& s : o.stop) {
    if (s.empty()) throw ArgumentError("stop strings must not be empty");
  }
  if (!o.stop.empty()) p.stop = o.stop;
  if (o.seed) p.seed = *o.seed;
  p.ignore_eos = o.ignore_eos;
  try {
    p.max_new_tokens = runtime_->fit_request(static_cast<int64_t>(prompt.size()), p.max_new_tokens);
    p.validate(runtime_->model().vocab_size());
  } catch (const ArgumentError&) {
    throw;
  } catch (const Error& e) {
    throw ArgumentError(e.what());
  }
  return p;
}

std::shared_ptr<engine::RequestStream> Session::submit(const std::vector<int32_t>& prompt,
                                                       const engine::SamplingParams& params) {
  try {
    return runtime_->client().submit(prompt, params);
  } catch (const Error& e) {
    throw ArgumentError(e.what());
  }
}

}  // namespace deepinfer::python
