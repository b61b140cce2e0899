// ApiServer: routes, readiness, API key, error bodies, signals and the graceful shutdown.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>

#include "core/log.h"
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

// Compares without an early exit, so response timing does not leak how much of a key matched.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

std::string not_ready_message(ServerState state) {
  return state == ServerState::draining ? "the server is shutting down"
                                        : "the model is still loading; retry when /health is 200";
}

Json model_card(const ModelInfo& info, int64_t created) {
  Json card;
  card["id"] = info.name;
  card["object"] = "model";
  card["created"] = created;
  card["owned_by"] = "deepinfer";
  card["root"] = info.root;
  card["parent"] = nullptr;
  card["max_model_len"] = info.max_model_len;
  return card;
}

// The tool-call parser: the one named, or with "auto" the one whose markup the chat template
// shows (the tool_use template first: it is the one rendered when tools are given).
toolcall::Family resolve_tool_family(const std::string& option, const ModelInfo& info) {
  if (option != "auto") return toolcall::family_from_name(option);
  toolcall::Family family = toolcall::Family::none;
  for (const auto* chat : {info.tool_template.get(), info.chat_template.get()}) {
    if (chat != nullptr && family == toolcall::Family::none) {
      family = toolcall::detect_family(chat->source());
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

}  // namespace

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(dump_json(error.to_json()), "application/json");
}

void ApiServer::Impl::add_job(const std::shared_ptr<Job>& job) {
  std::lock_guard lock(jobs_mutex);
  jobs.insert(job);
}

void ApiServer::Impl::remove_job(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(jobs_mutex);
    jobs.erase(job);
  }
  jobs_changed.notify_all();
}

void ApiServer::Impl::install_routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool api = req.path.rfind("/v1/", 0) == 0;
    if (api && !options.api_key.empty()) {
      const std::string header = req.get_header_value("Authorization");
      const std::string prefix = "Bearer ";
      const bool ok = header.rfind(prefix, 0) == 0 &&
                      same_secret(header.substr(prefix.size()), options.api_key);
      if (!ok) {
        res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, ApiError(401,
                                 header.empty() ? "missing API key: send Authorization: Bearer KEY"
                                                : "incorrect API key provided",
                                 "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    const ServerState s = state.load();
    if (api && s != ServerState::ready) {
      if (s == ServerState::draining) res.set_header("Connection", "close");
      res.set_header("Retry-After", "1");
      send_error(res, ApiError(503, not_ready_message(s)));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const ServerState s = state.load();
    if (s == ServerState::ready) {
      res.status = 200;
      return;
    }
    send_error(res, ApiError(503, not_ready_message(s)));
  });
  http.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json(Json{{"version", DEEPINFER_VERSION}}), "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::string text;
    if (state.load() != ServerState::starting && shared) {
      text = shared->metrics.render(client->stats());
    }
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  const auto created = static_cast<int64_t>(std::time(nullptr));
  http.Get("/v1/models", [this, created](const httplib::Request&, httplib::Response& res) {
    Json out;
    out["object"] = "list";
    out["data"] = Json::array({model_card(info, created)});
    res.set_content(dump_json(out), "application/json");
  });
  http.Get(
      R"(/v1/models/(.+))", [this, created](const httplib::Request& req, httplib::Response& res) {
        if (req.matches[1] != info.name) {
          send_error(
              res, ApiError(404, str_cat("The model `", req.matches[1].str(), "` does not exist."),
                            "model", "model_not_found"));
          return;
        }
        res.set_content(dump_json(model_card(info, created)), "application/json");
      });
  for (const auto& [path, api] : {std::pair{"/v1/completions", Api::completions},
                                  std::pair{"/v1/chat/completions", Api::chat}}) {
    http.Post(path, [this, api = api](const httplib::Request& req, httplib::Response& res) {
      try {
        handle_generation(api, req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    });
  }

  // Errors httplib raises itself (unknown route 404, body over the limit 413, ...) get the
  // OpenAI error object; responses that already carry a body keep it.
  const httplib::Server::HandlerWithResponse on_error = [this](const httplib::Request& req,
                                                               httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    if (res.status == 404) {
      message = str_cat("Invalid URL (", req.method, " ", req.path, ")");
    } else if (res.status == 413) {
      message = str_cat("the request body is larger than the server's limit of ",
                        options.max_body_bytes, " bytes (--max-body-bytes)");
    } else if (res.status == 405) {
      message = str_cat("method ", req.method, " is not allowed on ", req.path);
    } else {
      message = str_cat("HTTP error ", res.status);
    }
    res.set_content(error_body(res.status, message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  };
  http.set_error_handler(on_error);
  http.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        log::error("internal error on ", req.method, " ", req.path, ": ", what);
        send_error(res, ApiError(500, str_cat("internal server error: ", what)));
      });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (options.log_requests) log::debug(req.method, " ", req.path, " -> ", res.status);
    if (state.load() != ServerState::starting && shared) {
      shared->metrics.count_http_response(endpoint_label(req.path), res.status);
    }
  });
}

ApiServer::ApiServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  const auto& o = s.options;
  DI_CHECK(o.max_body_bytes > 0, "--max-body-bytes must be positive, got ", o.max_body_bytes);
  DI_CHECK(o.max_waiting_requests >= 0, "--max-waiting-requests must be >= 0, got ",
           o.max_waiting_requests);
  DI_CHECK(o.shutdown_timeout_s >= 0, "--shutdown-timeout must be >= 0, got ",
           o.shutdown_timeout_s);
  DI_CHECK(o.port >= 0 && o.port <= 65535, "--port must be in [0, 65535], got ", o.port);
  DI_CHECK(o.http_threads >= 1 && o.http_threads <= 4096,
           "--http-threads must be in [1, 4096], got ", o.http_threads);
  if (o.tool_call_parser != "auto") (void)toolcall::family_from_name(o.tool_call_parser);
  // A client vanishing mid-write must be an error return, not a process-killing SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  const int threads = o.http_threads;
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(static_cast<size_t>(o.max_body_bytes));
  s.http.set_keep_alive_timeout(o.keep_alive_timeout_s);
  s.http.set_keep_alive_max_count(1000);
  // httplib's default also sets SO_REUSEPORT, which lets a second server share the port
  // (requests would be split between them): take SO_REUSEADDR only.
  s.http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.install_routes();
  if (o.port == 0) {
    s.port = s.http.bind_to_any_port(o.host);
    DI_CHECK(s.port > 0, "cannot listen on ", o.host, " (any port)");
  } else {
    DI_CHECK(s.http.bind_to_port(o.host, o.port), "cannot listen on ", o.host, ":", o.port,
             ": the address is in use or not local; choose another --host / --port");
    s.port = o.port;
  }
  if (o.handle_signals) {
    g_signals.store(0);
    struct sigaction action = {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  }
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
  log::info("listening on http://", o.host, ":", s.port,
            " (/health answers 503 until the model is ready)");
}

ApiServer::~ApiServer() {
  Impl& s = *impl_;
  if (s.listener.joinable()) {
    // Not http.stop(): it does nothing until the accept loop has started, and a server
    // destroyed right away (the model failed to load) would then wait forever. A shut-down
    // listening socket also ends a loop that starts later.
    s.http.close_listener();
    // Streams still open end when their jobs are aborted.
    std::vector<std::shared_ptr<Job>> jobs;
    {
      std::lock_guard lock(s.jobs_mutex);
      jobs.assign(s.jobs.begin(), s.jobs.end());
    }
    for (const auto& job : jobs) job->abort();
    s.listener.join();
  }
  if (s.options.handle_signals) {
    std::signal(SIGTERM, SIG_DFL);
    std::signal(SIGINT, SIG_DFL);
  }
}

int ApiServer::port() const {
  return impl_->port;
}

void ApiServer::attach(engine::EngineClient& client, const tokenizer::Tokenizer& tokenizer,
                       ModelInfo info) {
  Impl& s = *impl_;
  DI_CHECK(s.client == nullptr, "ApiServer::attach: already attached");
  DI_CHECK(info.max_model_len > 0 && info.vocab_size > 0,
           "ApiServer::attach: ModelInfo needs max_model_len and vocab_size (model_info_from)");
  if (info.max_num_seqs > s.options.http_threads) {
    log::warn("--http-threads ", s.options.http_threads, " is below --max-num-seqs ",
              info.max_num_seqs, ": every open stream holds a connection thread");
  }
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
  s.shared = std::make_shared<SharedState>(s.info.name);
  s.tool_family = resolve_tool_family(s.options.tool_call_parser, s.info);
  s.state.store(ServerState::ready);
  log::info("ready: serving model '", s.info.name, "' (max_model_len ", s.info.max_model_len, ")");
}

void ApiServer::request_shutdown() {
  impl_->shutdown_requested.store(true);
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
  http.close_listener();
  size_t in_flight = 0;
  {
    std::lock_guard lock(jobs_mutex);
    in_flight = jobs.size();
  }
  log::info("shutting down: no new connections; ", in_flight, " requests in flight, waiting up to ",
            options.shutdown_timeout_s, " s");
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options.shutdown_timeout_s));
  std::unique_lock lock(jobs_mutex);
  // A second SIGTERM / SIGINT cuts the grace period short.
  while (!jobs.empty() && Clock::now() < deadline &&
         !(options.handle_signals && g_signals.load() > signals_at_start)) {
    jobs_changed.wait_for(lock, std::chrono::milliseconds(50));
  }
  if (!jobs.empty()) {
    log::warn("shutdown timeout: aborting ", jobs.size(), " requests");
    for (const auto& job : jobs) job->abort();
    // Aborted jobs end within an engine step; their responses then finish.
    jobs_changed.wait_for(lock, std::chrono::seconds(30), [this] { return jobs.empty(); });
  }
  lock.unlock();
  // The accept loop has ended; this waits for the connection threads (idle keep-alive ones
  // close within keep_alive_timeout_s).
  if (listener.joinable()) listener.join();
  log::info("server stopped");
}

int run_server(engine::EngineClient& client, const tokenizer::Tokenizer& tokenizer, ModelInfo info,
               const ServerOptions& options) {
  ApiServer server(options);
  server.attach(client, tokenizer, std::move(info));
  return server.wait();
}

}  // namespace deepinfer::server
