#include "cli/bench/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/engine_flags.h"
#include "core/error.h"
#include "core/log.h"

namespace deepinfer::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr size_t kTailLines = 40;

std::string self_executable() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  DI_CHECK(n > 0, "cannot find this executable (/proc/self/exe) to start the server");
  return std::string(path, static_cast<size_t>(n));
}

// The port of "listening on http://HOST:PORT" in one log line, or 0.
int listening_port(const std::string& line) {
  const std::string key = "listening on http://";
  const size_t at = line.find(key);
  if (at == std::string::npos) return 0;
  const size_t colon = line.find(':', at + key.size());
  if (colon == std::string::npos) return 0;
  return std::atoi(line.c_str() + colon + 1);
}

}  // namespace

std::unique_ptr<ServerProcess> ServerProcess::start(const std::vector<std::string>& args,
                                                    double timeout_s) {
  const std::string exe = self_executable();
  int pipe_fds[2];
  DI_CHECK(pipe2(pipe_fds, O_CLOEXEC) == 0, "pipe: ", std::strerror(errno));
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::string shown = "deepinfer";
  for (const auto& a : args) shown += " " + a;
  log::info("bench: starting ", shown);

  const pid_t pid = fork();
  DI_CHECK(pid >= 0, "fork: ", std::strerror(errno));
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    const int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) dup2(null_fd, STDOUT_FILENO);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->pid_ = pid;
  server->log_fd_ = pipe_fds[0];

  const auto deadline = clock_type::now() + std::chrono::duration<double>(timeout_s);
  const auto failed = [&](const std::string& why) {
    server->stop();
    fail("bench: the server it started ", why, "; its log ends:\n", server->log_tail());
  };
  // Its first lines carry the bound port.
  std::string partial;
  int port = 0;
  while (port == 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) failed(str_cat("did not report its port within ", timeout_s, " s"));
    pollfd p{server->log_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(server->log_fd_, buf, sizeof(buf));
    if (n <= 0) failed("exited before listening");
    partial.append(buf, static_cast<size_t>(n));
    size_t eol;
    while ((eol = partial.find('\n')) != std::string::npos) {
      const std::string line = partial.substr(0, eol);
      partial.erase(0, eol + 1);
      server->tail_.push_back(line);
      if (port == 0) port = listening_port(line);
    }
  }
  server->url_ = {"127.0.0.1", port, ""};
  server->drain_ = std::thread([s = server.get()] { s->read_log(); });
  // Ready when the model has loaded: /health answers 503 until then.
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      server->status_ = status;
      server->pid_ = -1;
      failed("exited while loading");
    }
    try {
      if (http::fetch(server->url_, "GET", "/health", "", 5).head.status == 200) break;
    } catch (const Error&) {
      // not accepting yet
    }
    if (clock_type::now() > deadline) failed(str_cat("was not ready within ", timeout_s, " s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  log::info("bench: server ready at http://127.0.0.1:", port, " (pid ", pid, ")");
  return server;
}

void ServerProcess::read_log() {
  std::string partial;
  char buf[4096];
  while (true) {
    const ssize_t n = read(log_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    partial.append(buf, static_cast<size_t>(n));
    size_t eol;
    std::lock_guard lock(mutex_);
    while ((eol = partial.find('\n')) != std::string::npos) {
      tail_.push_back(partial.substr(0, eol));
      partial.erase(0, eol + 1);
      if (tail_.size() > kTailLines) tail_.erase(tail_.begin());
    }
  }
}

std::string ServerProcess::log_tail() const {
  std::lock_guard lock(mutex_);
  std::string out;
  const size_t from = tail_.size() > kTailLines ? tail_.size() - kTailLines : 0;
  for (size_t i = from; i < tail_.size(); ++i) out += "  " + tail_[i] + "\n";
  return out;
}

double ServerProcess::peak_rss_mib() const {
  return pid_ > 0 ? cli::peak_rss_mib(pid_) : 0;
}

int ServerProcess::stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    const auto deadline = clock_type::now() + std::chrono::seconds(60);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (clock_type::now() > deadline) {
        log::warn("bench: the server did not exit 60 s after SIGTERM; killing it");
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    status_ = status;
    pid_ = -1;
  }
  if (drain_.joinable()) drain_.join();
  if (log_fd_ >= 0) {
    close(log_fd_);
    log_fd_ = -1;
  }
  return status_;
}

ServerProcess::~ServerProcess() {
  stop();
}

}  // namespace deepinfer::cli::bench
