#pragma once
// The server `bench --mode online` starts when it runs under mpirun: a child `deepinfer
// serve` process could not join the MPI job, so rank 0 serves the OpenAI API itself, on a
// free loopback port, with the model the other ranks follow (config::follow_driver); bench's
// HTTP client then talks to it as to any server. Stopped (drained) by the destructor.
#include <memory>
#include <string>

#include "cli/args.h"
#include "config/runtime.h"
#include "http/client.h"
#include "server/server.h"

namespace deepinfer::cli::bench {

class InProcessServer {
 public:
  // Loads `recipe` (rank 0 of the job) and serves it; the server flags bench passes on
  // (--served-model-name, --max-waiting-requests, --http-threads, --api-key) from `args`.
  static std::unique_ptr<InProcessServer> start(const config::RecipeConfig& recipe,
                                                const Args& args);
  ~InProcessServer();
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;

  const http::Url& url() const { return url_; }

 private:
  InProcessServer() = default;
  std::unique_ptr<config::Runtime> runtime_;  // outlives the server
  std::unique_ptr<server::ApiServer> server_;
  http::Url url_;
};

}  // namespace deepinfer::cli::bench
