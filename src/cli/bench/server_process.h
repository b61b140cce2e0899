#pragma once
// A `deepinfer serve` (or `run --mode api`) child process for `bench --mode online` without
// --base-url: started from this executable on a free port (--port 0; the bound port is read
// from its "listening on" log line), ready once /health answers 200, stopped with SIGTERM.
#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/client.h"

namespace deepinfer::cli::bench {

class ServerProcess {
 public:
  // `args` follow the executable ("serve", "--model", DIR, ...). Throws Error with the tail
  // of the server's log when it exits or is not ready within `timeout_s`.
  static std::unique_ptr<ServerProcess> start(const std::vector<std::string>& args,
                                              double timeout_s);
  ~ServerProcess();  // stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const http::Url& url() const { return url_; }
  pid_t pid() const { return pid_; }
  // The server's peak resident set (VmHWM) in MiB; 0 once it has exited.
  double peak_rss_mib() const;
  // SIGTERM, then up to 60 s for it to drain and exit (SIGKILL after); its exit status.
  int stop();
  std::string log_tail() const;

 private:
  ServerProcess() = default;
  void read_log();  // drains its stderr (the pipe must never fill)
  pid_t pid_ = -1;
  int log_fd_ = -1;
  http::Url url_;
  std::thread drain_;
  mutable std::mutex mutex_;
  std::vector<std::string> tail_;  // its last log lines
  int status_ = -1;
};

}  // namespace deepinfer::cli::bench
