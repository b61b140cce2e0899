#include "cli/bench/in_process_server.h"

#include "core/error.h"
#include "core/log.h"

namespace deepinfer::cli::bench {

std::unique_ptr<InProcessServer> InProcessServer::start(const config::RecipeConfig& recipe,
                                                        const Args& args) {
  std::unique_ptr<InProcessServer> s(new InProcessServer());
  server::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.handle_signals = false;  // bench's own process: it stops the server when done
  options.api_key = args.get_or("api-key", "");
  options.max_waiting_requests = args.get_int("max-waiting-requests", -1);
  options.http_threads = static_cast<int>(args.get_int("http-threads", options.http_threads));
  options.log_requests = false;
  s->server_ = std::make_unique<server::ApiServer>(options);
  config::RuntimeOptions runtime_options;
  runtime_options.warm_up = false;  // attach() warms the engine up
  s->runtime_ = config::Runtime::start(recipe, runtime_options);
  const config::Runtime& rt = *s->runtime_;
  server::ModelInfo info =
      server::model_info_from(rt.model_dir(), rt.engine(), rt.generation(), rt.tokenizer(),
                              args.get_or("served-model-name", rt.served_name()));
  info.defaults = server::sampling_defaults_from(rt.generation());
  s->runtime_->on_fault([server = s->server_.get()](const std::string& m) { server->fail(m); });
  s->server_->attach(s->runtime_->client(), rt.tokenizer(), std::move(info));
  s->url_ = http::parse_url(str_cat("http://127.0.0.1:", s->server_->port()));
  log::info("bench: serving in this process (rank 0 of the mpirun job) on ",
            "http://127.0.0.1:", s->server_->port());
  return s;
}

InProcessServer::~InProcessServer() {
  if (server_) {
    server_->request_shutdown();
    server_->wait();  // drains what is in flight
  }
  if (runtime_) runtime_->client().shutdown();
  server_.reset();
  runtime_.reset();  // stops the other ranks
}

}  // namespace deepinfer::cli::bench
