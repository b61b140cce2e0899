#pragma once
// Internal to http_server.cpp: one client connection, what exchanges share with the event
// loop, and the Exchange a handler answers through.
//
// Threads: the event loop owns the socket and every field marked "loop only". Handlers (any
// thread) touch a connection only through its Exchange, which takes Conn::mutex, appends to
// the output queue and wakes the loop (Shared::mark_dirty); the loop alone writes to the
// socket and closes it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_server.h"
#include "http/request_parser.h"

namespace deepinfer::http::detail {

using Clock = std::chrono::steady_clock;
struct Conn;

// What the loop and exchanges share. Held by shared_ptr: a handler may keep its Exchange
// after the server is gone, and its calls must then be harmless.
struct Shared {
  ServerConfig config;
  int wake_fd = -1;  // eventfd: mark_dirty() and commands wake the loop through it
  std::atomic<bool> draining{false};
  std::atomic<int64_t> buffered_body{0};  // request body bytes held (see Limits)
  std::atomic<int> paused_for_budget{0};  // connections not read for the body budget
  std::atomic<bool> budget_freed{false};
  std::atomic<size_t> active_exchanges{0};  // dispatched, response not completely written
  std::mutex dirty_mutex;
  std::vector<std::shared_ptr<Conn>> dirty;  // connections with new output or to close

  ~Shared();
  void wake() const;
  void mark_dirty(const std::shared_ptr<Conn>& conn);
  // A handler returned (or a connection closed): its body bytes leave the budget.
  void release_body(int64_t bytes);
  // The layer's own error answer: config.error_response, else {"error": message}.
  Response error(int status, const std::string& message) const;
};

enum class ConnState {
  reading,     // reading a request (or idle between requests)
  dispatched,  // a request is with a handler or its response is being written
  lingering,   // an error was answered: flush, shut down writing, discard input, close
};
enum class Reply { none, streaming, done };

struct Conn {
  explicit Conn(const Limits& limits) : parser(limits) {}

  // --- loop only ---
  uint64_t id = 0;
  int fd = -1;  // -1 once closed
  std::string remote;
  ConnState state = ConnState::reading;
  RequestParser parser;
  std::string pending_input;  // bytes after a complete request (pipelined), parsed after it
  bool request_begun = false;
  bool sent_continue = false;
  bool paused = false;  // EPOLLIN off while over the body budget
  // When the pause began: the time the server withheld reading is added to the request's
  // deadline on resume (a client waiting for the budget is not a slow client).
  Clock::time_point paused_at;
  bool counted = true;     // counts against max_connections (not the 503 ones)
  bool shut_down = false;  // shutdown(SHUT_WR) done while lingering
  bool http10 = false;     // the request being answered is HTTP/1.0 (no interim responses)
  // Dispatched, and the client has shut down its sending side: it may have closed, or only
  // half-closed (sent its request, then shutdown(SHUT_WR), as `nc -N` does) and still read.
  bool peer_done_sending = false;
  bool want_write = false;
  int64_t body_charge = 0;  // body bytes of the request being read, in Shared::buffered_body
  uint32_t events = 0;      // the epoll interest set
  Clock::time_point deadline = Clock::time_point::max();

  // --- shared, under mutex ---
  std::mutex mutex;
  std::string out;
  size_t out_pos = 0;
  bool closed = false;
  bool must_close = false;   // output over the limit, or a stream abandoned: the loop closes
  uint64_t seq = 0;          // the exchange in progress (one request at a time)
  bool in_exchange = false;  // dispatched and the response not completely written
  uint64_t aborted_seq = 0;  // the exchange that was in progress when the connection closed
  Reply reply = Reply::none;
  bool keep_alive = true;
  std::vector<std::function<void()>> on_close;

  size_t queued_locked() const { return out.size() - out_pos; }
  // Appends unless that takes the queue beyond `limit` (a piece into an empty queue always
  // fits, so one large response is not refused); beyond it sets must_close, returns false.
  bool append_locked(std::string_view bytes, size_t limit);
};

class ExchangeImpl final : public Exchange {
 public:
  ExchangeImpl(std::shared_ptr<Conn> conn, std::shared_ptr<Shared> shared, uint64_t seq,
               Request info, bool http10);
  // Dropped unanswered: 500. Dropped with its stream open: the connection is closed (the
  // client sees a truncated body rather than waiting forever).
  ~ExchangeImpl() override;

  void respond(Response response) override;
  void start_stream(Response head) override;
  bool write_chunk(std::string data) override;
  void end_stream() override;
  bool closed() const override;
  void on_close(std::function<void()> callback) override;
  size_t queued_bytes() const override;

  // The handler threw: 500 if nothing was sent yet, else the connection is closed.
  void handler_failed(const std::string& message);

 private:
  bool current_locked() const;
  std::string frame_locked(std::string_view data) const;
  void abort();
  void report(int status);

  std::shared_ptr<Conn> conn_;
  std::shared_ptr<Shared> shared_;
  uint64_t seq_;
  Request info_;  // the request without its body, for on_response
  bool head_only_;
  bool http10_;
};

}  // namespace deepinfer::http::detail
