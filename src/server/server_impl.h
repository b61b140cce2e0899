#pragma once
// ApiServer's insides, shared by the routes (routes.cpp), the lifecycle (lifecycle.cpp) and the
// generation handler (generate_handler.cpp, generation_response.cpp). Not a public header.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "http/http_server.h"
#include "http/router.h"
#include "server/errors.h"
#include "server/job.h"
#include "server/response_pump.h"
#include "server/server.h"
#include "toolcall/tool_parser.h"

namespace deepinfer::server {

// failed: the engine is gone (a rank of a distributed run stopped answering): 503 for every
// request until the process ends.
enum class ServerState { starting, ready, draining, failed };

// How a route answers: conveniences over the request's exchange (which adds the CORS headers
// of the request to whatever is sent).
struct Reply {
  std::shared_ptr<http::Exchange> exchange;

  void send(http::Response response) const;
  void send_json(int status, const std::string& body) const;
  void send_error(const ApiError& error) const;
  void start_stream(http::Response head) const;
};

// A generation response in progress (generation_response.cpp): pumped when its job has news,
// registered with the server until it has answered and its job has ended.
class GenerationResponse : public Pumped {
 public:
  virtual std::shared_ptr<Job> job() const = 0;
};

struct ApiServer::Impl {
  explicit Impl(ServerOptions opts) : options(std::move(opts)) {}

  ServerOptions options;
  std::vector<std::string> allowed_hosts;  // resolved from options (empty: any)
  AdmissionLimits admission;               // resolved by attach()
  http::Router router;
  std::unique_ptr<http::HttpServer> http;  // created last, destroyed first
  std::atomic<ServerState> state{ServerState::starting};
  std::atomic<bool> shutdown_requested{false};
  std::mutex failure_mutex;
  std::string failure;  // why the state is failed

  // Set by attach() before state turns ready.
  engine::EngineClient* client = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  ModelInfo info;
  std::shared_ptr<SharedState> shared;
  toolcall::Family tool_family = toolcall::Family::none;  // resolved from tool_call_parser
  std::shared_ptr<ResponsePump> pump;

  // Generation responses in flight (for the drain on shutdown).
  std::mutex responses_mutex;
  std::condition_variable responses_changed;
  std::set<std::shared_ptr<GenerationResponse>> responses;
  bool aborting = false;  // the drain aborted every job: later ones are aborted at once

  void add_response(const std::shared_ptr<GenerationResponse>& response);
  void remove_response(const GenerationResponse* response);
  void abort_all();

  void install_routes();
  void handle(http::Request&& request, std::shared_ptr<http::Exchange> exchange);
  void handle_generation(Api api, http::Request&& request, const Reply& reply);
  void drain();
  // The 503 message for a state other than ready.
  std::string unavailable_message(ServerState state);
};

}  // namespace deepinfer::server
