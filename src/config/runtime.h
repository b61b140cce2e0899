#pragma once
// Everything a recipe config describes, loaded and ready to answer: the model set-up of
// setup.h (thread pool, model, tokenizer), the chat template and a warmed-up engine behind a
// thread-safe EngineClient. Shared by `deepinfer run` (local and api modes), `deepinfer
// serve` and the Python binding, logging the start-up lines the articles show
// (SEED_INTERFACES.md §1):
//   loading model from PATH / model loaded in N s / parallel layout / experts distributed /
//   loading fused operators (only those that run) / attention fusion: enabled, MoE fusion:
//   enabled (or not applicable) / warming up /
//   warm-up completed in N s
// ("ready" is the caller's line: it knows what it is ready for).
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/setup.h"  // RecipeConfig, ModelSetup and the engine, model, tokenizer types
#include "engine/engine_client.h"
#include "tokenizer/chat_template.h"

namespace deepinfer::config {

struct RuntimeOptions {
  bool warm_up = true;  // one tiny generation before the client starts
  SetupOptions setup;   // its require_tokenizer is ignored: the runtime takes text
};

class Runtime {
 public:
  // Resolves and checks the config against the checkpoint before loading any weight: a
  // ConfigError means nothing was loaded. Other failures (bad weights) throw Error.
  static std::unique_ptr<Runtime> start(const RecipeConfig& config,
                                        const RuntimeOptions& options = {});
  ~Runtime();  // stops the client (aborting what is in flight) before the engine goes
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RecipeConfig& config() const { return config_; }
  const std::string& model_dir() const { return setup_.dir; }
  std::string served_name() const;  // model_name, else the directory's base name
  const io::GenerationConfig& generation() const { return setup_.generation; }
  const model::CausalLM& model() const { return *setup_.model; }
  // The engine belongs to the client's loop thread: read-only use (config(), stats()).
  const engine::Engine& engine() const { return *engine_; }
  engine::EngineClient& client() { return *client_; }
  const tokenizer::Tokenizer& tokenizer() const { return *setup_.tokenizer; }
  const engine::SamplingParams& sampling_defaults() const { return setup_.sampling; }
  const parallel::ParallelContext& parallel() const { return *setup_.parallel; }
  // Distributed runs: `handler` runs when a rank stops answering, before the job ends
  // (parallel/heartbeat.h). No-op in one process.
  void on_fault(parallel::Heartbeat::FaultHandler handler) {
    if (setup_.heartbeat) setup_.heartbeat->on_fault(std::move(handler));
  }
  bool has_chat_template() const { return chat_ != nullptr; }
  // The template chats are rendered with: chat_template's file when the config names one,
  // else the tokenizer's; nullptr when there is none.
  const tokenizer::ChatTemplate* chat_template() const { return chat_.get(); }

  // Text prompt ids as transformers' tokenizer(text) gives them (special tokens added).
  std::vector<int32_t> encode_prompt(std::string_view text) const;
  // The chat template rendered with the generation prompt, exactly as transformers'
  // apply_chat_template(add_generation_prompt=True), and its ids (the rendered text carries
  // its own special tokens). Throws Error when the model has no chat template.
  std::string render_chat(const nlohmann::ordered_json& messages,
                          const nlohmann::ordered_json& template_kwargs = {}) const;
  std::vector<int32_t> encode_chat(const nlohmann::ordered_json& messages,
                                   const nlohmann::ordered_json& template_kwargs = {}) const;
  // Throws Error when a prompt of `tokens` exceeds input_truncated_len or leaves no room to
  // generate within max_model_len; otherwise the max_new_tokens a request may use
  // (`requested`, lowered to fit max_model_len).
  int64_t fit_request(int64_t prompt_tokens, int64_t requested) const;

 private:
  Runtime() = default;
  RecipeConfig config_;
  ModelSetup setup_;
  std::unique_ptr<tokenizer::ChatTemplate> chat_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::EngineClient> client_;
};

}  // namespace deepinfer::config
