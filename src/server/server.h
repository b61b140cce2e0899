#pragma once
// The OpenAI-compatible HTTP API (docs/API.md): POST /v1/completions, /v1/chat/completions,
// GET /v1/models, /health, /metrics, /version, over deepinfer's own HTTP/1.1 server (src/http/).
// Callers: `deepinfer serve` and `deepinfer run --mode api`.
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
// closes the listening socket and every connection without a request in flight (idle
// keep-alive ones, ones still sending), lets in-flight requests finish for up to
// shutdown_timeout_s, aborts the rest (streams end with finish_reason "abort" and [DONE]),
// and returns 0 within shutdown_timeout_s + about 2 s whatever the clients do. The caller
// then shuts the EngineClient down. Process-wide effects: with handle_signals the SIGTERM /
// SIGINT handlers are replaced while the server lives.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  int64_t max_body_bytes = 8 << 20;  // larger request bodies get 413 (chunked ones too)
  // Admission (503 + Retry-After beyond either): requests accepted but without a token yet
  // (queued or in prefill), and their prompt tokens. -1: sized from the KV pool by attach()
  // (see admission_limits_for); 0: no limit.
  int64_t max_waiting_requests = -1;
  int64_t max_waiting_tokens = -1;
  double shutdown_timeout_s = 30;   // grace period for in-flight requests on SIGTERM
  int http_threads = 8;             // threads running request handlers (streams hold none)
  bool handle_signals = true;       // SIGTERM / SIGINT start the graceful shutdown
  double keep_alive_timeout_s = 5;  // idle keep-alive connections close after this
  double request_timeout_s = 15;    // a request not completely received by then: 408, closed
  // Host header allow-list (DNS-rebinding guard): names, with or without ":port"; "*" = any.
  // Empty: the loopback names (localhost, 127.0.0.1, [::1]) when bound to a loopback address,
  // any host otherwise.
  std::vector<std::string> allowed_hosts;
  // CORS (vLLM's --allowed-origins ...): empty origins = no CORS headers at all (browsers on
  // other origins cannot read responses). "*" allows every origin.
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_methods = {"*"};
  std::vector<std::string> allowed_headers = {"*"};
  bool allow_credentials = false;
  // How tool calls are read from chat output (docs/API.md, "Tool calling"): "auto" (from the
  // markup the chat template shows), "none" (never parsed: calls stay in `content`), or a
  // family: "hermes", "deepseek_v3", "deepseek_v31", "glm45". Checked by the constructor.
  std::string tool_call_parser = "auto";
  // Each request is logged at debug level ("POST /v1/completions -> 200"); false: never
  // (vLLM's --disable-log-requests).
  bool log_requests = true;
};

// Whether `host` (a --host value) is a loopback address or name.
bool is_loopback_host(const std::string& host);

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
  int64_t kv_pool_tokens = 0;  // tokens the KV pool holds (sizes the default admission limits)
  // Prompt texts longer than this many bytes are refused before they are tokenized (they
  // cannot fit in max_model_len tokens; see prompt_byte_limit). 0: no such check.
  int64_t max_prompt_bytes = 0;
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

// The most bytes a prompt of max_model_len tokens can take: every token of `tokenizer`
// decodes to at most its longest token's bytes, with a margin of 4x for normalizers that
// shorten text (NFC composes up to 3 characters into 1) and 4 KiB for added specials.
int64_t prompt_byte_limit(const tokenizer::Tokenizer& tokenizer, int64_t max_model_len);

// Default admission limits (ServerOptions::max_waiting_requests / max_waiting_tokens = -1):
// 4 x max_num_seqs requests waiting (at least 64), and twice the KV pool in prompt tokens
// (at least 4 x max_model_len): a queue longer than that waits more than a pool's worth.
struct AdmissionLimits {
  int64_t max_waiting_requests = 0;  // 0: none
  int64_t max_waiting_tokens = 0;
};
AdmissionLimits admission_limits_for(const ServerOptions& options, const ModelInfo& info);

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
  // The engine is gone for good (a rank of a distributed run stopped answering; `reason`
  // says which): from now on every request gets 503 "engine unavailable: REASON", and every
  // open response ends with that error (streams: an error event, then [DONE]). Waits up to
  // `grace_s` for them to be written; the caller then ends the process. Thread-safe; the
  // engine's loop thread may be stuck meanwhile (it is not waited for).
  void fail(const std::string& reason, double grace_s = 2.0);
  bool shutdown_requested() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ApiServer + attach + wait.
int run_server(engine::EngineClient& client, const tokenizer::Tokenizer& tokenizer, ModelInfo info,
               const ServerOptions& options);

}  // namespace deepinfer::server
