// The event loop. Each connection is in one of three states (detail::ConnState):
//   reading     parsing a request; deadline: keep_alive_timeout_s while idle, then
//               request_timeout_s from the request's first byte (408). Body bytes are not
//               read while Shared::buffered_body is over max_buffered_body_bytes (EPOLLIN off).
//   dispatched  the request is with a worker; only EPOLLRDHUP is watched (pipelined bytes wait
//               in the socket). A client that stops sending may have closed or only
//               half-closed, and TCP cannot tell which until we send. An open stream's
//               client is taken as gone at once (streams idle; SSE clients do not
//               half-close). Otherwise the response (or a stream's head) is the probe, and
//               one not begun after kHalfCloseProbe is preceded by an interim
//               "100 Continue" (HTTP/1.1 clients skip 1xx). A closed client answers the
//               probe with a reset: the connection closes and its exchange's on_close
//               callbacks run (the request is aborted); a half-closed one reads its
//               response. No deadline: streams may idle.
//   lingering   after an answer that ends the connection: flush, shutdown(SHUT_WR), discard
//               input until EOF or 1 s, close (the client reads the status, not a reset).
// Deadlines are checked by a sweep over all connections when the earliest one is due.
#include "http/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "http/connection.h"
#include "http/http_text.h"
#include "http/worker_pool.h"

namespace deepinfer::http {

using detail::Clock;
using detail::Conn;
using detail::ConnState;
using detail::ExchangeImpl;
using detail::Reply;
using detail::Shared;

namespace {

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadBytes = 64 * 1024;
constexpr int kReadRounds = 4;  // reads per readiness event, so one client cannot starve others
constexpr auto kLinger = std::chrono::seconds(1);
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
// How long a client that stopped sending waits before the interim response probes whether it
// is still there: quick answers go out without one.
constexpr auto kHalfCloseProbe = std::chrono::milliseconds(300);
constexpr int64_t kTrimAfterBodyBytes = 1 << 20;  // see the worker task in dispatch()

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Many slow clients each hold a descriptor; the default soft limit (1024) would cap them.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) log::debug("http: could not raise RLIMIT_NOFILE");
}

std::string format_address(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
    return str_cat(host, ":", ntohs(a.sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof(host));
    return str_cat("[", host, "]:", ntohs(a.sin6_port));
  }
  return "?";
}

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  Handler handler;
  int listen_fd = -1;
  int epoll_fd = -1;
  int port = 0;
  WorkerPool workers;
  std::thread loop;

  // --- loop only ---
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns;
  uint64_t next_id = 2;
  size_t counted_conns = 0;
  Clock::time_point next_sweep = Clock::time_point::max();
  bool accept_paused = false;  // out of descriptors: retried at the next sweep
  std::vector<char> read_buffer = std::vector<char>(kReadBytes);

  // --- commands to the loop, under control_mutex ---
  mutable std::mutex control_mutex;
  std::condition_variable control_cv;
  bool started = false;
  bool loop_exited = false;
  bool stop_accept_requested = false;
  bool stop_accept_done = false;
  bool drained = false;  // draining and no response left to write
  bool hard_stop = false;
  std::mutex stop_mutex;  // one stop() at a time
  bool stopped = false;

  const Limits& limits() const { return shared->config.limits; }

  void listen_on(const std::string& host, int wanted_port);
  void run_loop();
  int timeout_ms() const;
  void process_wake();
  void accept_all();
  void handle_events(const std::shared_ptr<Conn>& conn, uint32_t events);
  void read_request_bytes(const std::shared_ptr<Conn>& conn);
  void discard_input(const std::shared_ptr<Conn>& conn);
  void peer_done_sending(const std::shared_ptr<Conn>& conn);
  void probe_peer(const std::shared_ptr<Conn>& conn);
  bool feed_input(const std::shared_ptr<Conn>& conn, std::string_view data);
  void dispatch(const std::shared_ptr<Conn>& conn);
  void answer_error(const std::shared_ptr<Conn>& conn, int status, const std::string& message);
  bool service_output(const std::shared_ptr<Conn>& conn);
  void enter_reading(const std::shared_ptr<Conn>& conn);
  void enter_lingering(const std::shared_ptr<Conn>& conn);
  void update_interest(Conn& conn);
  void set_deadline(Conn& conn, Clock::time_point when);
  void pause_for_budget(Conn& conn);
  void resume_paused();
  void sweep();
  void close_conn(const std::shared_ptr<Conn>& conn);
  void loop_stop_accepting();
  void check_drained();
  // Whether `conn` may start reading its body: its whole bound is reserved at once, so a body
  // once begun always completes (reserving piece by piece let every connection hold part of
  // the budget and none finish). One body always fits when nothing else is held.
  bool waits_for_budget(const Conn& conn) const {
    if (!conn.parser.in_body() || conn.body_charge > 0) return false;
    const int64_t held = shared->buffered_body.load();
    const auto need = static_cast<int64_t>(conn.parser.body_bound());
    return held > 0 && held + need > limits().max_buffered_body_bytes;
  }
  void reserve_body(Conn& conn) {
    if (!conn.parser.in_body() || conn.body_charge > 0) return;
    conn.body_charge = static_cast<int64_t>(conn.parser.body_bound());
    shared->buffered_body.fetch_add(conn.body_charge);
  }
};

void HttpServer::Impl::listen_on(const std::string& host, int wanted_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(wanted_port);
  // "[::1]" as written in URLs: getaddrinfo wants the bare address.
  const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']'
                               ? host.substr(1, host.size() - 2)
                               : host;
  const int rc =
      getaddrinfo(bare.empty() ? nullptr : bare.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) fail("cannot listen on ", host, ":", wanted_port, ": ", gai_strerror(rc));
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, limits().listen_backlog) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd = fd;
    break;
  }
  freeaddrinfo(found);
  if (listen_fd < 0) fail("cannot listen on ", host, ":", wanted_port, ": ", last_error);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
}

HttpServer::HttpServer(ServerConfig config, Handler handler) : impl_(std::make_unique<Impl>()) {
  raise_open_file_limit();
  Impl& s = *impl_;
  s.shared->config = std::move(config);
  s.handler = std::move(handler);
  s.listen_on(s.shared->config.host, s.shared->config.port);
  s.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  s.shared->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.epoll_fd < 0 || s.shared->wake_fd < 0) {
    ::close(s.listen_fd);
    fail("http server on ", s.shared->config.host, ":", s.port,
         ": cannot create epoll/eventfd: ", std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.listen_fd, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.shared->wake_fd, &ev);
}

HttpServer::~HttpServer() {
  stop(0);
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  if (impl_->epoll_fd >= 0) ::close(impl_->epoll_fd);
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::start() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.control_mutex);  // stop_accepting() reads s.loop
  if (s.started || s.stopped) return;
  s.started = true;
  s.workers.start(std::max(1, s.shared->config.worker_threads));
  s.loop = std::thread([&s] { s.run_loop(); });
}

size_t HttpServer::active_exchanges() const {
  return impl_->shared->active_exchanges.load();
}

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.control_mutex);
  if (!s.started || s.loop_exited) {
    // No loop to ask: nothing is connected, only the listening socket to close.
    s.shared->draining = true;
    if (s.listen_fd >= 0) {
      epoll_ctl(s.epoll_fd, EPOLL_CTL_DEL, s.listen_fd, nullptr);
      ::close(s.listen_fd);
      s.listen_fd = -1;
    }
    return;
  }
  if (std::this_thread::get_id() == s.loop.get_id()) {
    lock.unlock();
    s.loop_stop_accepting();
    return;
  }
  s.stop_accept_requested = true;
  s.shared->wake();
  s.control_cv.wait(lock, [&s] { return s.stop_accept_done || s.loop_exited; });
}

void HttpServer::stop(double grace_s) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> stop_lock(s.stop_mutex);
  if (s.stopped) return;
  stop_accepting();
  bool run_loop;
  {
    std::unique_lock<std::mutex> lock(s.control_mutex);
    run_loop = s.started;
    s.control_cv.wait_for(lock, seconds(std::max(0.0, grace_s)),
                          [&s] { return s.drained || s.loop_exited; });
    s.hard_stop = true;
  }
  if (run_loop) {
    s.shared->wake();
    s.loop.join();
  }
  s.workers.stop_and_join();  // handlers still running finish; their exchanges are closed
  std::lock_guard<std::mutex> lock(s.control_mutex);
  s.stopped = true;
}

// ---------------------------------------------------------------- the event loop

void HttpServer::Impl::run_loop() {
  std::vector<epoll_event> events(256);
  for (;;) {
    const int n =
        epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), timeout_ms());
    if (n < 0 && errno != EINTR) {
      log::error("http: epoll_wait failed: ", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[static_cast<size_t>(i)].data.u64;
      if (id == kListenId) {
        accept_all();
      } else if (id == kWakeId) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = ::read(shared->wake_fd, &count, sizeof(count));
      } else {
        const auto it = conns.find(id);
        if (it == conns.end()) continue;
        const std::shared_ptr<Conn> conn = it->second;  // close_conn erases the map's copy
        handle_events(conn, events[static_cast<size_t>(i)].events);
      }
    }
    process_wake();
    if (Clock::now() >= next_sweep) sweep();
    {
      std::lock_guard<std::mutex> lock(control_mutex);
      if (hard_stop) break;
    }
    if (shared->draining.load()) check_drained();
  }
  // Stop: every connection closes now; their on_close callbacks run here.
  std::vector<std::shared_ptr<Conn>> all;
  for (auto& [id, conn] : conns) all.push_back(conn);
  for (auto& conn : all) close_conn(conn);
  std::lock_guard<std::mutex> lock(control_mutex);
  loop_exited = true;
  control_cv.notify_all();
}

int HttpServer::Impl::timeout_ms() const {
  if (next_sweep == Clock::time_point::max()) return -1;
  const auto left = next_sweep - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

void HttpServer::Impl::process_wake() {
  bool stop_accept = false;
  {
    std::lock_guard<std::mutex> lock(control_mutex);
    stop_accept = stop_accept_requested && !stop_accept_done;
  }
  if (stop_accept) loop_stop_accepting();
  std::vector<std::shared_ptr<Conn>> dirty;
  {
    std::lock_guard<std::mutex> lock(shared->dirty_mutex);
    dirty.swap(shared->dirty);
  }
  for (const auto& conn : dirty) {
    if (conn->fd >= 0) service_output(conn);
  }
  if (shared->budget_freed.exchange(false)) resume_paused();
}

void HttpServer::Impl::accept_all() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd =
        accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        log::warn("http: cannot accept a connection (", std::strerror(errno),
                  "); retrying in 100 ms");
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        accept_paused = true;
        next_sweep = std::min(next_sweep, Clock::now() + kAcceptRetry);
      }
      return;  // EAGAIN: accepted everything pending
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto conn = std::make_shared<Conn>(limits());
    conn->id = next_id++;
    conn->fd = fd;
    conn->remote = format_address(addr);
    conn->events = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = conn->events;
    ev.data.u64 = conn->id;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    conns.emplace(conn->id, conn);
    if (counted_conns >= limits().max_connections) {
      conn->counted = false;
      answer_error(conn, 503,
                   str_cat("the server has reached max_connections (", limits().max_connections,
                           "); retry later"));
      continue;
    }
    ++counted_conns;
    set_deadline(*conn, Clock::now() + seconds(limits().keep_alive_timeout_s));
  }
}

void HttpServer::Impl::handle_events(const std::shared_ptr<Conn>& conn, uint32_t events) {
  if (events & EPOLLERR) return close_conn(conn);
  if ((events & EPOLLOUT) && !service_output(conn)) return;
  if (conn->fd < 0 || !(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) return;
  switch (conn->state) {
    case ConnState::reading:
      // Paused for the body budget, only a hang-up is watched; it ends the connection.
      if (conn->paused) {
        if (events & EPOLLHUP) close_conn(conn);
        return;
      }
      return read_request_bytes(conn);
    case ConnState::lingering:
      return discard_input(conn);
    case ConnState::dispatched:
      if (events & EPOLLHUP) return close_conn(conn);  // both directions gone: a reset
      if (events & EPOLLRDHUP) peer_done_sending(conn);
      return;
  }
}

void HttpServer::Impl::read_request_bytes(const std::shared_ptr<Conn>& conn) {
  for (int round = 0; round < kReadRounds; ++round) {
    if (waits_for_budget(*conn)) return pause_for_budget(*conn);
    if (conn->paused) return;
    const ssize_t n = ::recv(conn->fd, read_buffer.data(), read_buffer.size(), 0);
    if (n > 0) {
      if (!feed_input(conn, std::string_view(read_buffer.data(), static_cast<size_t>(n)))) return;
      if (static_cast<size_t>(n) < read_buffer.size()) return;  // drained the socket
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return close_conn(conn);  // EOF or a reset: nothing to answer
  }
}

void HttpServer::Impl::discard_input(const std::shared_ptr<Conn>& conn) {
  for (int round = 0; round < kReadRounds; ++round) {
    const ssize_t n = ::recv(conn->fd, read_buffer.data(), read_buffer.size(), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return close_conn(conn);  // EOF: the client has read our answer and closed
  }
}

void HttpServer::Impl::peer_done_sending(const std::shared_ptr<Conn>& conn) {
  if (conn->peer_done_sending) return;
  bool streaming;
  {
    std::lock_guard<std::mutex> lock(conn->mutex);
    streaming = conn->reply == Reply::streaming;
  }
  // A stream may idle for long (queued, thinking) with nothing to probe with, and SSE clients
  // do not half-close: its client is taken as gone.
  if (streaming) return close_conn(conn);
  conn->peer_done_sending = true;
  update_interest(*conn);  // EPOLLRDHUP stays set: no longer watched (EPOLLHUP/ERR always are)
  set_deadline(*conn, Clock::now() + kHalfCloseProbe);
}

void HttpServer::Impl::probe_peer(const std::shared_ptr<Conn>& conn) {
  {
    std::lock_guard<std::mutex> lock(conn->mutex);
    // A response begun is its own probe; HTTP/1.0 knows no interim responses (such a client
    // that left is noticed when its response is sent).
    if (!conn->in_exchange || conn->reply != Reply::none || conn->http10) return;
    conn->out += "HTTP/1.1 100 Continue\r\n\r\n";
  }
  service_output(conn);
}

bool HttpServer::Impl::feed_input(const std::shared_ptr<Conn>& conn, std::string_view data) {
  if (data.empty()) return true;
  RequestParser& parser = conn->parser;
  if (!conn->request_begun) {
    conn->request_begun = true;
    set_deadline(*conn, Clock::now() + seconds(limits().request_timeout_s));
  }
  for (;;) {
    size_t used;
    if (!parser.headers_complete()) {
      used = parser.feed_head(data);
    } else if (waits_for_budget(*conn)) {
      // Body bytes wait (at most one read) until handlers free enough of the budget.
      conn->pending_input.assign(data);
      pause_for_budget(*conn);
      return false;
    } else {
      reserve_body(*conn);
      used = parser.feed(data);
    }
    data.remove_prefix(used);
    switch (parser.status()) {
      case RequestParser::Status::need_more:
        if (!data.empty()) continue;  // the head is complete; its body follows
        if (parser.expects_continue() && !conn->sent_continue) {
          // curl waits (1 s) for this before sending a large body.
          conn->sent_continue = true;
          {
            std::lock_guard<std::mutex> lock(conn->mutex);
            conn->out += "HTTP/1.1 100 Continue\r\n\r\n";
          }
          return service_output(conn);
        }
        return true;
      case RequestParser::Status::error:
        answer_error(conn, parser.error_status(), parser.error_message());
        return false;
      case RequestParser::Status::complete:
        conn->pending_input.assign(data);
        dispatch(conn);
        return false;
    }
  }
}

void HttpServer::Impl::dispatch(const std::shared_ptr<Conn>& conn) {
  const bool keep_alive = conn->parser.keep_alive() && !shared->draining.load();
  Request request = conn->parser.take_request();
  request.remote_address = conn->remote;
  Request info = request;
  info.body.clear();
  conn->state = ConnState::dispatched;
  conn->http10 = request.version_minor == 0;
  conn->peer_done_sending = false;
  conn->request_begun = false;
  conn->sent_continue = false;
  conn->deadline = Clock::time_point::max();  // a running handler or stream has no deadline
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(conn->mutex);
    seq = ++conn->seq;
    conn->in_exchange = true;
    conn->reply = Reply::none;
    conn->keep_alive = keep_alive;
  }
  shared->active_exchanges.fetch_add(1);
  auto exchange = std::make_shared<ExchangeImpl>(conn, shared, seq, std::move(info),
                                                 request.version_minor == 0);
  const int64_t charge = std::exchange(conn->body_charge, 0);
  update_interest(*conn);
  workers.post([this, request = std::move(request), exchange, charge]() mutable {
    try {
      handler(std::move(request), exchange);
    } catch (const std::exception& e) {
      exchange->handler_failed(e.what());
    } catch (...) {
      exchange->handler_failed("a non-standard exception");
    }
    // The request body counts against the budget until its handler returns.
    shared->release_body(charge);
    // A large body leaves megabytes of freed heap in this worker's malloc arena, which glibc
    // keeps; with several workers a burst of large requests would pin several times the body
    // budget. Give it back now.
    if (charge >= kTrimAfterBodyBytes) malloc_trim(0);
  });
}

void HttpServer::Impl::answer_error(const std::shared_ptr<Conn>& conn, int status,
                                    const std::string& message) {
  const Request& partial = conn->parser.request();
  const Response response = shared->error(status, message);
  std::string bytes = format_head(response, Framing::length, response.body.size(), true, false);
  if (partial.method != "HEAD") bytes += response.body;
  if (shared->config.on_response) {
    try {
      shared->config.on_response(partial, status);
    } catch (const std::exception& e) {
      log::error("http: on_response threw: ", e.what());
    }
  }
  shared->release_body(std::exchange(conn->body_charge, 0));
  conn->parser.reset();
  {
    std::lock_guard<std::mutex> lock(conn->mutex);
    conn->out += bytes;
  }
  enter_lingering(conn);
}

bool HttpServer::Impl::service_output(const std::shared_ptr<Conn>& conn) {
  bool completed = false;
  bool keep_alive = false;
  bool broken = false;
  bool pending = false;
  std::vector<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(conn->mutex);
    broken = conn->must_close;
    while (!broken && conn->out_pos < conn->out.size()) {
      const ssize_t n = ::send(conn->fd, conn->out.data() + conn->out_pos,
                               conn->out.size() - conn->out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        conn->out_pos += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        broken = true;
      }
    }
    if (conn->out_pos == conn->out.size()) {
      conn->out.clear();
      conn->out_pos = 0;
    } else if (conn->out_pos > (1u << 20)) {
      conn->out.erase(0, conn->out_pos);
      conn->out_pos = 0;
    }
    pending = conn->out_pos < conn->out.size();
    if (!broken && !pending && conn->in_exchange && conn->reply == Reply::done) {
      conn->in_exchange = false;
      dropped.swap(conn->on_close);  // written completely: they never fire
      completed = true;
      keep_alive = conn->keep_alive;
    }
  }
  if (broken) {
    close_conn(conn);
    return false;
  }
  conn->want_write = pending;
  if (completed) {
    shared->active_exchanges.fetch_sub(1);
    if (keep_alive && !shared->draining.load()) {
      enter_reading(conn);
    } else {
      enter_lingering(conn);
    }
    return conn->fd >= 0;
  }
  if (conn->state == ConnState::lingering && !pending && !conn->shut_down) {
    // The answer is out: FIN it, keep reading what the client still sends until it closes,
    // so our close does not reset the connection before the client read the status.
    ::shutdown(conn->fd, SHUT_WR);
    conn->shut_down = true;
  }
  update_interest(*conn);
  return true;
}

void HttpServer::Impl::enter_reading(const std::shared_ptr<Conn>& conn) {
  conn->state = ConnState::reading;
  conn->request_begun = false;
  conn->sent_continue = false;
  set_deadline(*conn, Clock::now() + seconds(limits().keep_alive_timeout_s));
  update_interest(*conn);
  if (!conn->pending_input.empty()) {
    const std::string pipelined = std::move(conn->pending_input);
    conn->pending_input.clear();
    feed_input(conn, pipelined);
  }
}

void HttpServer::Impl::enter_lingering(const std::shared_ptr<Conn>& conn) {
  conn->state = ConnState::lingering;
  conn->request_begun = false;
  conn->pending_input.clear();
  if (conn->paused) {
    conn->paused = false;
    shared->paused_for_budget.fetch_sub(1);
  }
  set_deadline(*conn, Clock::now() + kLinger);
  service_output(conn);
}

void HttpServer::Impl::update_interest(Conn& conn) {
  if (conn.fd < 0) return;
  // While paused for the body budget not even EPOLLRDHUP: a client that sent its whole body
  // and half-closed would otherwise wake the loop continuously until the budget frees.
  uint32_t events = 0;
  if ((conn.state == ConnState::reading && !conn.paused) || conn.state == ConnState::lingering) {
    events = EPOLLIN | EPOLLRDHUP;
  } else if (conn.state == ConnState::dispatched && !conn.peer_done_sending) {
    events = EPOLLRDHUP;  // the client leaving is noticed while its handler runs
  }
  if (conn.want_write) events |= EPOLLOUT;
  if (events == conn.events) return;
  conn.events = events;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = conn.id;
  epoll_ctl(epoll_fd, EPOLL_CTL_MOD, conn.fd, &ev);
}

void HttpServer::Impl::set_deadline(Conn& conn, Clock::time_point when) {
  conn.deadline = when;
  next_sweep = std::min(next_sweep, when);
}

void HttpServer::Impl::pause_for_budget(Conn& conn) {
  if (conn.paused) return;
  conn.paused = true;
  conn.paused_at = Clock::now();
  shared->paused_for_budget.fetch_add(1);
  update_interest(conn);
  // A handler may have returned between the check and the pause: look again.
  if (!waits_for_budget(conn)) shared->budget_freed = true;
}

void HttpServer::Impl::resume_paused() {
  std::vector<std::shared_ptr<Conn>> paused;
  for (auto& [id, conn] : conns) {
    if (conn->paused) paused.push_back(conn);
  }
  // Oldest connection first.
  std::sort(paused.begin(), paused.end(),
            [](const auto& a, const auto& b) { return a->id < b->id; });
  for (auto& conn : paused) {
    if (conn->fd < 0 || !conn->paused) continue;
    if (waits_for_budget(*conn)) return;  // first come, first served
    conn->paused = false;
    shared->paused_for_budget.fetch_sub(1);
    if (conn->deadline != Clock::time_point::max()) {
      set_deadline(*conn, conn->deadline + (Clock::now() - conn->paused_at));
    }
    update_interest(*conn);
    if (!conn->pending_input.empty()) {
      const std::string held = std::move(conn->pending_input);
      conn->pending_input.clear();
      feed_input(conn, held);
    }
  }
}

void HttpServer::Impl::sweep() {
  const auto now = Clock::now();
  next_sweep = Clock::time_point::max();
  if (accept_paused && listen_fd >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
    accept_paused = false;
  }
  std::vector<std::shared_ptr<Conn>> expired;
  for (auto& [id, conn] : conns) {
    if (conn->deadline <= now) {
      expired.push_back(conn);
    } else {
      next_sweep = std::min(next_sweep, conn->deadline);
    }
  }
  for (auto& conn : expired) {
    if (conn->fd < 0) continue;
    conn->deadline = Clock::time_point::max();
    if (conn->state == ConnState::reading && conn->request_begun) {
      answer_error(
          conn, 408,
          str_cat("the request was not complete within ", limits().request_timeout_s, " s"));
    } else if (conn->state != ConnState::dispatched) {
      close_conn(conn);  // idle keep-alive, or the linger time is over
    } else if (conn->peer_done_sending) {
      probe_peer(conn);
    }
  }
}

void HttpServer::Impl::close_conn(const std::shared_ptr<Conn>& conn) {
  if (conn->fd < 0) return;
  bool was_active;
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(conn->mutex);
    conn->closed = true;
    was_active = conn->in_exchange;
    conn->in_exchange = false;
    if (was_active) conn->aborted_seq = conn->seq;
    callbacks.swap(conn->on_close);
    conn->out.clear();
    conn->out_pos = 0;
  }
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, conn->fd, nullptr);
  ::close(conn->fd);
  conn->fd = -1;
  if (conn->paused) {
    conn->paused = false;
    shared->paused_for_budget.fetch_sub(1);
  }
  shared->release_body(std::exchange(conn->body_charge, 0));
  if (conn->counted) --counted_conns;
  conns.erase(conn->id);
  if (was_active) shared->active_exchanges.fetch_sub(1);
  for (auto& callback : callbacks) {
    try {
      callback();
    } catch (const std::exception& e) {
      log::error("http: an on_close callback threw: ", e.what());
    }
  }
}

void HttpServer::Impl::loop_stop_accepting() {
  if (listen_fd >= 0) {
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    ::close(listen_fd);
    listen_fd = -1;
  }
  shared->draining = true;
  std::vector<std::shared_ptr<Conn>> unrequested;
  for (auto& [id, conn] : conns) {
    if (conn->state == ConnState::reading) {
      unrequested.push_back(conn);
    } else if (conn->state == ConnState::dispatched) {
      std::lock_guard<std::mutex> lock(conn->mutex);
      conn->keep_alive = false;
    }
  }
  for (auto& conn : unrequested) close_conn(conn);
  std::lock_guard<std::mutex> lock(control_mutex);
  stop_accept_done = true;
  control_cv.notify_all();
}

void HttpServer::Impl::check_drained() {
  for (auto& [id, conn] : conns) {
    if (conn->state == ConnState::dispatched || conn->want_write) return;
  }
  std::lock_guard<std::mutex> lock(control_mutex);
  if (!drained) {
    drained = true;
    control_cv.notify_all();
  }
}

}  // namespace deepinfer::http
