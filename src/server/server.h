#pragma once
// The OpenAI-compatible HTTP API (docs/API.md): POST /v1/completions, /v1/chat/completions,
// GET /v1/models, /health, /metrics, /version, over cpp-httplib. Callers: `deepinfer serve`
// and `deepinfer run --mode api`.
//
//   server::ApiServer server(options);           // binds now: /health answers 503 meanwhile
//   ... load the model, build Engine + EngineClient ...
//   server.attach(client, tokenizer, server::model_info_from(dir, engine, generation, tok));
//   return server.wait();  // serves until SIGTERM / SIGINT, drains, returns 0
//
// or, when nothing needs to answer while the model loads:
//   return server::run_server(client, tokenizer, info, options);
//
// attach() runs one tiny warm-up generation before /health turns 200. wait() on SIGTERM:
// closes the listening socket, refuses new requests on open connections (503), lets in-flight
// requests finish for up to shutdown_timeout_s, aborts the rest, returns 0. The caller then
// shuts the EngineClient down. Process-wide effects: SIGPIPE is ignored (a vanished client is
// a failed write), and with handle_signals the SIGTERM / SIGINT handlers are replaced while the
// server lives.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/engine_client.h"
#include "io/hf_config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see ApiServer::port())
  // Non-empty: every /v1/* request needs "Authorization: Bearer <api_key>" (else 401).
  std::string api_key;
  int64_t max_body_bytes = 8 << 20;  // larger request bodies get 413
  // > 0: a completion request gets 503 + Retry-After while this many requests are accepted but
  // have produced no token yet (queued or in prefill). 0: no limit.
  int64_t max_waiting_requests = 0;
  double shutdown_timeout_s = 30;  // grace period for in-flight requests on SIGTERM
  int http_threads = 256;          // connections served at once (each open stream holds one)
  bool handle_signals = true;      // SIGTERM / SIGINT start the graceful shutdown
  int keep_alive_timeout_s = 5;    // idle keep-alive connections close after this
  // How tool calls are read from chat output (docs/API.md, "Tool calling"): "auto" (from the
  // markup the chat template shows), "none" (never parsed: calls stay in `content`), or a
  // family: "hermes", "deepseek_v3", "deepseek_v31", "glm45". Checked by the constructor.
  std::string tool_call_parser = "auto";
  // Each request is logged at debug level ("POST /v1/completions -> 200"); false: never
  // (vLLM's --disable-log-requests).
  bool log_requests = true;
};

// Request defaults taken from generation_config.json, used when a request omits the field
// (as vLLM's --generation-config auto does).
struct SamplingDefaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_tokens;  // max_new_tokens: caps the default of chat requests
};
SamplingDefaults sampling_defaults_from(const io::GenerationConfig& generation);

// What the API must know about the model behind the EngineClient.
struct ModelInfo {
  std::string name;  // the served model id (requests naming another model get 404)
  std::string root;  // model directory, shown by /v1/models
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  int64_t max_num_seqs = 0;
  bool priority_scheduling = false;  // requests may set "priority" only under this policy
  SamplingDefaults defaults;
  // Chat templates (tokenizer_config.json): the default one and the named "tool_use" one;
  // without a default template /v1/chat/completions answers 400.
  std::shared_ptr<const tokenizer::ChatTemplate> chat_template;
  std::shared_ptr<const tokenizer::ChatTemplate> tool_template;
  std::string bos_token;  // template variables ("" when the tokenizer has none)
  std::string eos_token;
  // Most top logprobs a request may ask for (vLLM's --max-logprobs); larger asks get 400.
  int64_t max_logprobs = 20;
};

// Fills ModelInfo from a loaded engine; `name` empty: the directory's base name. Throws Error
// when the chat template does not parse.
ModelInfo model_info_from(const std::string& model_dir, const engine::Engine& engine,
                          const io::GenerationConfig& generation,
                          const tokenizer::Tokenizer& tokenizer, std::string name = "",
                          bool use_generation_defaults = true);

class ApiServer {
 public:
  // Binds host:port (throws Error when it cannot) and starts answering: /health 503 and
  // every other route 503 until attach().
  explicit ApiServer(ServerOptions options);
  ~ApiServer();  // stops at once (no drain) if wait() was not called
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  int port() const;  // the bound port
  // Warms the engine up with one tiny generation, then serves the API. `client` and
  // `tokenizer` must outlive the server.
  void attach(engine::EngineClient& client, const tokenizer::Tokenizer& tokenizer, ModelInfo info);
  // Blocks until SIGTERM / SIGINT (with handle_signals) or request_shutdown(); then drains as
  // described above and returns 0.
  int wait();
  void request_shutdown();  // thread-safe
  bool shutdown_requested() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ApiServer + attach + wait.
int run_server(engine::EngineClient& client, const tokenizer::Tokenizer& tokenizer, ModelInfo info,
               const ServerOptions& options);

}  // namespace deepinfer::server
