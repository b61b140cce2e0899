#pragma once
// deepinfer's own HTTP/1.1 server: one event-loop thread (epoll) owns every socket, reads and
// parses requests under hard limits, and writes responses from per-connection output queues;
// a small pool of worker threads runs the handlers. A connection that is still sending its
// request, or an open stream waiting for tokens, holds no thread. Knows nothing of the OpenAI
// API: server/ builds on it.
//
//   http::HttpServer server(config, [](http::Request&& req, std::shared_ptr<http::Exchange> ex) {
//     http::Response res;
//     res.body = "hello";
//     ex->respond(std::move(res));
//   });
//   server.start();
//   ...
//   server.stop_accepting();   // drain: no new connections, idle ones closed
//   server.stop(2.0);          // flush what is queued for up to 2 s, close everything, join
//
// Why not cpp-httplib (docs/API.md, "HTTP layer"): Debian's build fixes the listen backlog at 5
// and the header limits at compile time, reads headers without a deadline while bytes trickle,
// reads a chunked or length-less body whole, and holds one thread per connection.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::http {

// Every limit the server enforces. Violations get the status named, then the connection closes.
struct Limits {
  size_t max_request_line_bytes = 8 * 1024;  // 414
  size_t max_header_bytes = 64 * 1024;       // request line + headers (and chunk trailers): 431
  size_t max_header_count = 128;             // 431
  int64_t max_body_bytes = 8 << 20;          // 413, for Content-Length and chunked bodies alike
  // Request bodies held in memory across all connections (read but not yet handed to, or
  // still owned by, a handler); beyond it the server stops reading bodies until some are freed.
  int64_t max_buffered_body_bytes = 64 << 20;
  double request_timeout_s = 15;       // first byte of a request to its last byte: 408, close
  double keep_alive_timeout_s = 5;     // an idle connection between requests is closed
  size_t max_connections = 4096;       // beyond it a new connection gets 503 and is closed
  size_t max_output_bytes = 16 << 20;  // queued for a client that does not read: closed
  int listen_backlog = 1024;
};

struct Header {
  std::string name;   // as sent
  std::string value;  // leading / trailing whitespace removed
};

struct Request {
  std::string method;     // as sent (methods are case-sensitive)
  std::string target;     // the request target as sent, e.g. "/v1/models/a%2Fb?x=1"
  std::string path;       // target before '?', percent-decoded ("/v1/models/a/b")
  std::string query;      // after '?', raw
  int version_minor = 1;  // HTTP/1.<minor>
  std::vector<Header> headers;
  std::string body;            // whole (Content-Length or de-chunked)
  std::string remote_address;  // "127.0.0.1:54321"

  // First header of that name, compared case-insensitively; nullptr when absent.
  const std::string* header(std::string_view name) const;
};

struct Response {
  int status = 200;
  // Content-Length, Transfer-Encoding, Connection and Date are added by the server.
  std::vector<Header> headers;
  std::string body;
  void set_header(std::string name, std::string value);  // replaces one of the same name
};

// The one answer to one request. Thread-safe; may outlive the handler call (streaming code
// keeps it). Exactly one of respond() or start_stream() is called once; after start_stream(),
// write_chunk() any number of times, then end_stream(). Calls after the connection closed are
// ignored (write_chunk returns false).
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(Response response) = 0;
  // Sends the status and headers now, body chunked (`head.body`, if any, is the first chunk).
  virtual void start_stream(Response head) = 0;
  virtual bool write_chunk(std::string data) = 0;
  virtual void end_stream() = 0;
  // The client closed the connection, it was closed for a limit, or the server stopped.
  virtual bool closed() const = 0;
  // `callback` runs once when the connection closes before the response was completely
  // written (client gone, limit, server stop); at once when that already happened. Runs on
  // the event-loop thread: it must not block.
  virtual void on_close(std::function<void()> callback) = 0;
  // Output queued but not yet written to the socket.
  virtual size_t queued_bytes() const = 0;
};

using Handler = std::function<void(Request&& request, std::shared_ptr<Exchange> exchange)>;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see HttpServer::port())
  Limits limits;
  int worker_threads = 8;  // threads running handlers
  // The body of the errors the HTTP layer answers itself (400, 408, 411, 413, 414, 431, 501,
  // 503, 505): given the status and a one-line message. Default: {"error": message}.
  std::function<Response(int status, const std::string& message)> error_response;
  // Called once per response when its status line is queued (also for the layer's own errors,
  // where `request` holds what was parsed so far). Any thread; must not block.
  std::function<void(const Request& request, int status)> on_response;
};

class HttpServer {
 public:
  // Binds and listens (throws Error naming host:port when it cannot). Nothing is served until
  // start().
  HttpServer(ServerConfig config, Handler handler);
  ~HttpServer();  // stop(0) if still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port
  void start();      // starts the event loop and the workers

  // Closes the listening socket, closes connections with no request dispatched (idle
  // keep-alive ones, ones still sending a request), and gives every response that is still
  // running "Connection: close". Thread-safe, idempotent.
  void stop_accepting();
  // Connections whose response is not completely written yet.
  size_t active_exchanges() const;
  // stop_accepting(), then waits up to `grace_s` for queued output to be written, closes
  // every connection (their Exchange::on_close callbacks run), stops the loop and joins the
  // workers (handlers still running are waited for). Thread-safe, idempotent.
  void stop(double grace_s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::http
