#include "http/connection.h"

#include <unistd.h>

#include <cstdio>
#include <exception>

#include "core/log.h"
#include "http/http_text.h"

namespace deepinfer::http::detail {

Shared::~Shared() {
  if (wake_fd >= 0) ::close(wake_fd);
}

void Shared::wake() const {
  const uint64_t one = 1;
  // A full counter (never in practice) still leaves the loop readable, so the result can go.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof(one));
}

void Shared::mark_dirty(const std::shared_ptr<Conn>& conn) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(dirty_mutex);
    first = dirty.empty();
    dirty.push_back(conn);
  }
  // The loop takes the whole list after every wake-up: one wake per batch is enough.
  if (first) wake();
}

void Shared::release_body(int64_t bytes) {
  if (bytes == 0) return;
  buffered_body.fetch_sub(bytes);
  if (paused_for_budget.load() > 0) {
    budget_freed.store(true);
    wake();
  }
}

Response Shared::error(int status, const std::string& message) const {
  Response response;
  if (config.error_response) {
    try {
      response = config.error_response(status, message);
    } catch (const std::exception& e) {
      log::error("http: error_response threw: ", e.what());
      response = default_error_response(status, message);
    }
  } else {
    response = default_error_response(status, message);
  }
  response.status = status;
  return response;
}

bool Conn::append_locked(std::string_view bytes, size_t limit) {
  const size_t queued = queued_locked();
  if (queued > 0 && queued + bytes.size() > limit) {
    must_close = true;
    return false;
  }
  out.append(bytes);
  return true;
}

ExchangeImpl::ExchangeImpl(std::shared_ptr<Conn> conn, std::shared_ptr<Shared> shared, uint64_t seq,
                           Request info, bool http10)
    : conn_(std::move(conn)),
      shared_(std::move(shared)),
      seq_(seq),
      info_(std::move(info)),
      head_only_(info_.method == "HEAD"),
      http10_(http10) {}

ExchangeImpl::~ExchangeImpl() {
  Reply reply;
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (!current_locked()) return;
    reply = conn_->reply;
  }
  if (reply == Reply::none) {
    respond(shared_->error(500, "the handler returned without a response"));
  } else if (reply == Reply::streaming) {
    abort();
  }
}

bool ExchangeImpl::current_locked() const {
  return !conn_->closed && conn_->in_exchange && conn_->seq == seq_;
}

std::string ExchangeImpl::frame_locked(std::string_view data) const {
  if (http10_) return std::string(data);
  char size[24];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string framed = size;
  framed.reserve(framed.size() + data.size() + 2);
  framed += data;
  framed += "\r\n";
  return framed;
}

void ExchangeImpl::report(int status) {
  if (!shared_->config.on_response) return;
  try {
    shared_->config.on_response(info_, status);
  } catch (const std::exception& e) {
    log::error("http: on_response threw: ", e.what());
  }
}

void ExchangeImpl::respond(Response response) {
  const int status = response.status;
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (!current_locked() || conn_->reply != Reply::none) return;
    const bool close = !conn_->keep_alive || shared_->draining.load();
    if (close) conn_->keep_alive = false;
    const bool no_body = status < 200 || status == 204 || status == 304;
    const std::string head = format_head(response, no_body ? Framing::none : Framing::length,
                                         response.body.size(), close, http10_ && !close);
    const bool with_body = !head_only_ && !no_body;
    conn_->reply = Reply::done;
    if (!with_body) {
      conn_->append_locked(head, shared_->config.limits.max_output_bytes);
    } else if (conn_->queued_locked() == 0) {
      // Appended in place: a large body is not copied into a temporary first.
      conn_->out.reserve(conn_->out.size() + head.size() + response.body.size());
      conn_->out += head;
      conn_->out += response.body;
    } else {
      conn_->append_locked(head + response.body, shared_->config.limits.max_output_bytes);
    }
  }
  report(status);
  shared_->mark_dirty(conn_);
}

void ExchangeImpl::start_stream(Response head) {
  const int status = head.status;
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (!current_locked() || conn_->reply != Reply::none) return;
    // An HTTP/1.0 client knows no chunked coding: the body ends when the connection closes.
    const bool close = !conn_->keep_alive || shared_->draining.load() || http10_;
    if (close) conn_->keep_alive = false;
    std::string bytes =
        format_head(head, http10_ ? Framing::until_close : Framing::chunked, 0, close, false);
    if (!head_only_ && !head.body.empty()) bytes += frame_locked(head.body);
    conn_->reply = Reply::streaming;
    conn_->append_locked(bytes, shared_->config.limits.max_output_bytes);
  }
  report(status);
  shared_->mark_dirty(conn_);
}

bool ExchangeImpl::write_chunk(std::string data) {
  bool ok;
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (!current_locked() || conn_->reply != Reply::streaming || conn_->must_close) return false;
    // An empty chunk would end the body; HEAD sends none.
    if (data.empty() || head_only_) return true;
    ok = conn_->append_locked(frame_locked(data), shared_->config.limits.max_output_bytes);
  }
  shared_->mark_dirty(conn_);
  return ok;
}

void ExchangeImpl::end_stream() {
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (!current_locked() || conn_->reply != Reply::streaming) return;
    if (!head_only_ && !http10_) conn_->out += "0\r\n\r\n";
    conn_->reply = Reply::done;
  }
  shared_->mark_dirty(conn_);
}

bool ExchangeImpl::closed() const {
  std::lock_guard<std::mutex> lock(conn_->mutex);
  return conn_->closed || conn_->must_close;
}

void ExchangeImpl::on_close(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (current_locked()) {
      conn_->on_close.push_back(std::move(callback));
      return;
    }
    // Completely written already (or a later request runs): it will never fire.
    if (!(conn_->closed && conn_->aborted_seq == seq_)) return;
  }
  callback();  // the connection closed before this response was written: at once
}

size_t ExchangeImpl::queued_bytes() const {
  std::lock_guard<std::mutex> lock(conn_->mutex);
  return conn_->queued_locked();
}

void ExchangeImpl::handler_failed(const std::string& message) {
  Reply reply;
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (!current_locked()) return;
    reply = conn_->reply;
  }
  if (reply == Reply::none) {
    respond(shared_->error(500, "internal error: " + message));
  } else if (reply == Reply::streaming) {
    abort();
  }
}

void ExchangeImpl::abort() {
  {
    std::lock_guard<std::mutex> lock(conn_->mutex);
    if (!current_locked()) return;
    conn_->must_close = true;
  }
  shared_->mark_dirty(conn_);
}

}  // namespace deepinfer::http::detail
