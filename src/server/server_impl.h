#pragma once
// ApiServer's insides, shared by the routes (openai_server.cpp) and the generation handler
// (generate_handler.cpp). Not a public header.
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <httplib.h>

#include "server/job.h"
#include "server/server.h"
#include "toolcall/tool_parser.h"

namespace deepinfer::server {

// httplib's server plus one operation it lacks: stop accepting while the open connections are
// still served. Shutting the listening socket down makes accept() fail, so the accept loop
// closes the socket and ends, then waits for the connection threads; unlike stop(), svr_sock_
// keeps its value, so streams in progress are not cut (httplib ends a chunked response early
// once svr_sock_ is INVALID_SOCKET).
class HttpServer : public httplib::Server {
 public:
  void close_listener() {
    const auto sock = svr_sock_.load();
    if (sock != INVALID_SOCKET) ::shutdown(sock, SHUT_RDWR);
  }
};

enum class ServerState { starting, ready, draining };

struct ApiServer::Impl {
  explicit Impl(ServerOptions opts) : options(std::move(opts)) {}

  ServerOptions options;
  HttpServer http;
  std::thread listener;
  int port = 0;
  std::atomic<ServerState> state{ServerState::starting};
  std::atomic<bool> shutdown_requested{false};

  // Set by attach() before state turns ready.
  engine::EngineClient* client = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  ModelInfo info;
  std::shared_ptr<SharedState> shared;
  toolcall::Family tool_family = toolcall::Family::none;  // resolved from tool_call_parser

  // Generation requests in flight (for the drain on shutdown).
  std::mutex jobs_mutex;
  std::condition_variable jobs_changed;
  std::set<std::shared_ptr<Job>> jobs;

  void add_job(const std::shared_ptr<Job>& job);
  void remove_job(const std::shared_ptr<Job>& job);

  void install_routes();
  void handle_generation(Api api, const httplib::Request& req, httplib::Response& res);
  void drain();
};

// Sends an ApiError as the response.
void send_error(httplib::Response& res, const ApiError& error);

}  // namespace deepinfer::server
