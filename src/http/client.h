#pragma once
// A small blocking HTTP/1.1 client for the benchmark and tools: connect with a timeout, send
// one request, read the response head, then its body incrementally (Content-Length, chunked,
// or until the server closes), and split a text/event-stream body into SSE events as bytes
// arrive. It relies only on standard HTTP/1.1, never on how deepinfer's server frames its
// output. One Connection per request (no keep-alive pool): a benchmark measures requests,
// and a fresh connection keeps a failed one from poisoning the next.
//
//   http::Url url = http::parse_url("http://127.0.0.1:8000");
//   http::Connection conn = http::Connection::open(url.host, url.port, 5.0);
//   conn.send(http::format_request("POST", "/v1/completions", url, body, {}));
//   http::ResponseReader response(conn);           // reads the head
//   http::SseParser sse;
//   std::string piece;
//   while (response.read_some(piece)) for (auto& event : sse.feed(piece)) ...;
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::http {

struct Url {
  std::string host;
  int port = 80;
  std::string base_path;  // "" or "/prefix" (no trailing '/'), prepended to request paths
};

// "http://host[:port][/prefix]"; throws Error naming the URL (https is refused: no TLS here).
Url parse_url(std::string_view url);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// "METHOD base_path+path HTTP/1.1" with Host, Content-Length (when there is a body or the
// method is POST), Content-Type: application/json for a body, and `headers`.
std::string format_request(std::string_view method, std::string_view path, const Url& url,
                           std::string_view body, const HeaderList& headers);

struct ResponseHead {
  int status = 0;
  std::string reason;
  HeaderList headers;
  // The first header of that name, compared case-insensitively; nullptr when absent.
  const std::string* header(std::string_view name) const;
};

// Parses a status line and headers ending in an empty line. nullopt while the blank line has
// not arrived yet; throws Error on a malformed head. `consumed`: the head's length in bytes.
std::optional<ResponseHead> parse_response_head(std::string_view bytes, size_t& consumed);

// Decodes a chunked body as it arrives (RFC 9112 7.1): sizes in hex, chunk extensions
// ignored, trailers skipped. Throws Error on a malformed size or a missing CRLF.
class ChunkedDecoder {
 public:
  // Appends the body bytes in `input` to `out`; returns how many input bytes it used (all of
  // them until the last chunk and trailers are done).
  size_t feed(std::string_view input, std::string& out);
  bool done() const { return state_ == State::done; }

 private:
  enum class State { size_line, data, data_crlf, trailers, done };
  State state_ = State::size_line;
  std::string line_;  // a size or trailer line not yet complete
  uint64_t remaining_ = 0;
};

struct SseEvent {
  std::string event;  // the "event:" field ("" when absent: a message)
  std::string data;   // "data:" lines joined with '\n'
};

// The text/event-stream format (the HTML standard's "event stream interpretation"): lines end
// in LF, CRLF or CR; an empty line dispatches the event; ':' lines are comments; one space
// after the field's colon is dropped; an event without data is not dispatched.
class SseParser {
 public:
  std::vector<SseEvent> feed(std::string_view bytes);

 private:
  void line(std::string_view text, std::vector<SseEvent>& out);
  std::string pending_;  // an incomplete line
  bool last_was_cr_ = false;
  SseEvent current_;
  bool has_data_ = false;
};

// A connected TCP socket with send / receive timeouts. Move-only; closes on destruction.
class Connection {
 public:
  // Resolves and connects within `timeout_s` (also the timeout of every later send and
  // receive); throws Error "connect to host:port: <why>".
  static Connection open(const std::string& host, int port, double timeout_s);
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  void send(std::string_view bytes);  // all of it, or throws Error
  // Up to `size` bytes: 0 when the peer closed; throws Error on a timeout or reset.
  size_t receive(char* data, size_t size);
  void set_timeout(double seconds);

 private:
  explicit Connection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  int fd_ = -1;
  std::string peer_;  // "host:port", for errors
};

// The response to one request on `connection`: the head is read by the constructor, the body
// by read_some / read_all, de-chunked when chunked.
class ResponseReader {
 public:
  explicit ResponseReader(Connection& connection);
  const ResponseHead& head() const { return head_; }
  // Replaces `out` with the next body bytes; false (out empty) at the end of the body.
  // Throws Error when the connection ends before a framed body does.
  bool read_some(std::string& out);
  std::string read_all();

 private:
  bool fill();  // more raw bytes into buffer_; false at EOF
  Connection& connection_;
  ResponseHead head_;
  std::string buffer_;  // raw bytes received, not yet used
  enum class Framing { length, chunked, until_close };
  Framing framing_ = Framing::until_close;
  uint64_t remaining_ = 0;  // Content-Length framing
  ChunkedDecoder chunked_;
  bool finished_ = false;
};

struct FetchResult {
  ResponseHead head;
  std::string body;
};

// One whole request and response on a fresh connection (e.g. GET /health, /metrics).
FetchResult fetch(const Url& url, std::string_view method, std::string_view path,
                  std::string_view body, double timeout_s);

}  // namespace deepinfer::http
