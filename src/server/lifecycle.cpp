// ApiServer's life: bind, attach the model (warm-up, readiness), signals, and the graceful
// shutdown that always ends.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

#include "core/log.h"
#include "server/request_guard.h"
#include "server/responses.h"
#include "server/server_impl.h"

namespace deepinfer::server {

namespace {

using Clock = std::chrono::steady_clock;

// Signals seen (the handler may only touch a lock-free atomic).
std::atomic<int> g_signals{0};

void on_signal(int) {
  g_signals.fetch_add(1);
}

std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                            "/metrics", "/version"}) {
    if (path == known) return known;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// The tool-call parser: the one named, or with "auto" the one whose markup the chat template
// shows (the tool_use template first: it is the one rendered when tools are given).
toolcall::Family resolve_tool_family(const std::string& option, const ModelInfo& info) {
  if (option != "auto") return toolcall::family_from_name(option);
  toolcall::Family family = toolcall::Family::none;
  for (const auto* chat : {info.tool_template.get(), info.chat_template.get()}) {
    if (chat != nullptr && family == toolcall::Family::none) {
      // A native chat format (no Jinja source) is known by its name.
      family = toolcall::detect_family(chat->native_format().empty() ? chat->source()
                                                                     : chat->native_format());
    }
  }
  if (family == toolcall::Family::none) {
    log::info(
        "tool calls: the chat template shows no tool-call markup; calls are not parsed "
        "(set a tool-call parser to parse them)");
  } else {
    log::info("tool calls: parsed as ", toolcall::family_name(family), " (from the chat template)");
  }
  return family;
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

void ApiServer::Impl::add_response(const std::shared_ptr<GenerationResponse>& response) {
  bool abort_now = false;
  {
    std::lock_guard lock(responses_mutex);
    responses.insert(response);
    abort_now = aborting;
  }
  if (abort_now) response->job()->abort();
}

void ApiServer::Impl::remove_response(const GenerationResponse* response) {
  {
    std::lock_guard lock(responses_mutex);
    for (auto it = responses.begin(); it != responses.end(); ++it) {
      if (it->get() == response) {
        responses.erase(it);
        break;
      }
    }
  }
  responses_changed.notify_all();
}

void ApiServer::Impl::abort_all() {
  std::vector<std::shared_ptr<GenerationResponse>> all;
  {
    std::lock_guard lock(responses_mutex);
    aborting = true;
    all.assign(responses.begin(), responses.end());
  }
  for (const auto& r : all) r->job()->abort();
}

ApiServer::ApiServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  const auto& o = s.options;
  DI_CHECK(o.max_body_bytes > 0, "--max-body-bytes must be positive, got ", o.max_body_bytes);
  DI_CHECK(o.max_waiting_requests >= -1, "--max-waiting-requests must be >= 0, got ",
           o.max_waiting_requests);
  DI_CHECK(o.max_waiting_tokens >= -1, "--max-waiting-tokens must be >= 0, got ",
           o.max_waiting_tokens);
  DI_CHECK(o.shutdown_timeout_s >= 0, "--shutdown-timeout must be >= 0, got ",
           o.shutdown_timeout_s);
  DI_CHECK(o.request_timeout_s > 0, "--request-timeout must be positive, got ",
           o.request_timeout_s);
  DI_CHECK(o.port >= 0 && o.port <= 65535, "--port must be in [0, 65535], got ", o.port);
  DI_CHECK(o.http_threads >= 1 && o.http_threads <= 1024,
           "--http-threads must be in [1, 1024], got ", o.http_threads);
  if (o.tool_call_parser != "auto") (void)toolcall::family_from_name(o.tool_call_parser);
  s.allowed_hosts = effective_allowed_hosts(o);
  if (!is_loopback_host(o.host) && o.api_key.empty()) {
    log::warn("serving on ", o.host,
              " beyond loopback without an API key: anyone who can reach this address can use "
              "the model (set --api-key, --api-key-file or DEEPINFER_API_KEY)");
  }
  s.install_routes();

  http::ServerConfig config;
  config.host = o.host;
  config.port = o.port;
  config.worker_threads = o.http_threads;
  config.limits.max_body_bytes = o.max_body_bytes;
  // Bodies read and not yet handled, across connections: each costs about three times its
  // size while a handler parses it, so this bounds the memory a burst of large requests takes.
  config.limits.max_buffered_body_bytes = std::max<int64_t>(16 << 20, 2 * o.max_body_bytes);
  config.limits.keep_alive_timeout_s = o.keep_alive_timeout_s;
  config.limits.request_timeout_s = o.request_timeout_s;
  config.error_response = [](int status, const std::string& message) {
    http::Response res;
    res.status = status;
    res.set_header("Content-Type", "application/json");
    res.body = error_body(status, message);
    return res;
  };
  config.on_response = [&s](const http::Request& req, int status) {
    if (s.options.log_requests) log::debug(req.method, " ", req.path, " -> ", status);
    if (s.state.load() != ServerState::starting) {
      s.shared->metrics.count_http_response(endpoint_label(req.path), status);
    }
  };
  s.http = std::make_unique<http::HttpServer>(
      std::move(config), [&s](http::Request&& req, std::shared_ptr<http::Exchange> ex) {
        s.handle(std::move(req), std::move(ex));
      });
  if (o.handle_signals) {
    g_signals.store(0);
    struct sigaction action = {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  }
  s.http->start();
  log::info("listening on http://", o.host, ":", s.http->port(),
            " (/health answers 503 until the model is ready)");
}

ApiServer::~ApiServer() {
  Impl& s = *impl_;
  if (s.http) {
    // Streams still open end when their jobs are aborted; stop() closes what is left.
    s.abort_all();
    s.http->stop(0.5);
  }
  s.pump.reset();
  if (s.options.handle_signals) {
    std::signal(SIGTERM, SIG_DFL);
    std::signal(SIGINT, SIG_DFL);
  }
}

int ApiServer::port() const {
  return impl_->http->port();
}

void ApiServer::attach(engine::EngineClient& client, const tokenizer::Tokenizer& tokenizer,
                       ModelInfo info) {
  Impl& s = *impl_;
  DI_CHECK(s.client == nullptr, "ApiServer::attach: already attached");
  DI_CHECK(info.max_model_len > 0 && info.vocab_size > 0,
           "ApiServer::attach: ModelInfo needs max_model_len and vocab_size (model_info_from)");
  const auto start = Clock::now();
  engine::SamplingParams warm;
  warm.temperature = 0;
  warm.max_new_tokens = 2;
  warm.ignore_eos = true;
  std::vector<int32_t> ids = tokenizer.encode("Hello", false);
  if (ids.empty() || ids.front() >= info.vocab_size) ids = {0};
  auto stream = client.submit({ids.front()}, warm);
  while (auto out = stream->next()) {
    if (out->finished) break;
  }
  log::info("warm-up generation took ", std::chrono::duration<double>(Clock::now() - start).count(),
            " s");
  s.client = &client;
  s.tokenizer = &tokenizer;
  s.info = std::move(info);
  s.admission = admission_limits_for(s.options, s.info);
  s.shared = std::make_shared<SharedState>(s.info.name);
  s.pump = std::make_shared<ResponsePump>();
  s.tool_family = resolve_tool_family(s.options.tool_call_parser, s.info);
  s.state.store(ServerState::ready);
  log::info("ready: serving model '", s.info.name, "' (max_model_len ", s.info.max_model_len,
            "; admission: ", s.admission.max_waiting_requests, " waiting requests, ",
            s.admission.max_waiting_tokens, " waiting prompt tokens)");
}

void ApiServer::request_shutdown() {
  impl_->shutdown_requested.store(true);
}

void ApiServer::fail(const std::string& reason, double grace_s) {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.failure_mutex);
    s.failure = reason;
  }
  s.state.store(ServerState::failed);
  log::error("engine unavailable: ", reason, "; answering 503 and ending open responses");
  std::vector<std::shared_ptr<GenerationResponse>> open;
  {
    std::lock_guard lock(s.responses_mutex);
    open.assign(s.responses.begin(), s.responses.end());
  }
  for (const auto& r : open) r->job()->fail(str_cat("engine unavailable: ", reason));
  const auto deadline = Clock::now() + seconds(grace_s);
  {
    std::unique_lock lock(s.responses_mutex);
    s.responses_changed.wait_until(lock, deadline, [&s] { return s.responses.empty(); });
  }
  // The last bytes of the responses just ended are still being written: give them a moment
  // (new requests meanwhile get 503).
  std::this_thread::sleep_until(std::min(deadline, Clock::now() + std::chrono::milliseconds(500)));
}

bool ApiServer::shutdown_requested() const {
  return impl_->shutdown_requested.load() || (impl_->options.handle_signals && g_signals.load());
}

int ApiServer::wait() {
  while (!shutdown_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  impl_->drain();
  return 0;
}

void ApiServer::Impl::drain() {
  state.store(ServerState::draining);
  const int signals_at_start = g_signals.load();
  http->stop_accepting();
  size_t in_flight = 0;
  {
    std::lock_guard lock(responses_mutex);
    in_flight = responses.size();
  }
  log::info("shutting down: no new connections; ", in_flight, " requests in flight, waiting up to ",
            options.shutdown_timeout_s, " s");
  const auto deadline = Clock::now() + seconds(options.shutdown_timeout_s);
  std::unique_lock lock(responses_mutex);
  // A second SIGTERM / SIGINT cuts the grace period short.
  while (!responses.empty() && Clock::now() < deadline &&
         !(options.handle_signals && g_signals.load() > signals_at_start)) {
    responses_changed.wait_for(lock, std::chrono::milliseconds(50));
  }
  if (!responses.empty()) {
    log::warn("shutdown: aborting ", responses.size(), " requests still running");
    lock.unlock();
    abort_all();
    lock.lock();
    // Aborted jobs end within an engine step; their responses then finish ("abort", [DONE]).
    // A step that runs longer than this (a long prefill) is not waited for.
    responses_changed.wait_for(lock, std::chrono::seconds(1), [this] { return responses.empty(); });
  }
  lock.unlock();
  // Writes what the responses queued (for at most a second), then closes every connection.
  http->stop(1.0);
  log::info("server stopped");
}

int run_server(engine::EngineClient& client, const tokenizer::Tokenizer& tokenizer, ModelInfo info,
               const ServerOptions& options) {
  ApiServer server(options);
  server.attach(client, tokenizer, std::move(info));
  return server.wait();
}

}  // namespace deepinfer::server
