#pragma once
// An incremental HTTP/1.1 request parser: feed it bytes as they arrive and it says "need
// more", "complete" or "error" (with the status to answer). Pure: no sockets, no clocks, so
// the unit tests and the fuzzer drive it directly. Every buffer it keeps is bounded by the
// Limits it was given; a limit is reported while the offending part is still arriving, never
// after it was read whole.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_server.h"

namespace deepinfer::http {

// A body is read into pieces of at most this size and joined once complete: growing one
// string by doubling would leave the copies it outgrew in the heap (a 200 MB upload stopped at
// an 8 MiB limit peaked 17.7 MB above idle that way, 9.9 MB in pieces).
inline constexpr size_t kBodyPieceBytes = 1 << 20;

// The longest chunk-size line (size, extensions, CRLF) a chunked body may use; longer is 400.
inline constexpr size_t kMaxChunkSizeLineBytes = 4096;

class RequestParser {
 public:
  enum class Status { need_more, complete, error };

  explicit RequestParser(const Limits& limits);

  // Consumes a prefix of `data` and returns its length. Stops right after the last byte of a
  // complete request (the rest belongs to the next request) and at the first error; in both
  // states further calls consume nothing until reset() / take_request().
  size_t feed(std::string_view data);
  // As feed(), but returns right after the head: the server reads no body byte into memory
  // while the body budget is spent.
  size_t feed_head(std::string_view data);

  Status status() const { return status_; }
  bool started() const { return started_; }  // a byte of this request has been consumed
  bool headers_complete() const { return phase_ > Phase::headers; }
  bool in_body() const { return headers_complete() && status_ == Status::need_more; }
  // The headers asked for "Expect: 100-continue" and a body is to follow.
  bool expects_continue() const { return expects_continue_; }
  // Whether the connection stays open after this request (valid once the headers are read).
  bool keep_alive() const { return keep_alive_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // What was parsed so far (complete once status() is complete; until then the body read so
  // far is counted by body_bytes(), not in request().body).
  const Request& request() const { return request_; }
  size_t body_bytes() const { return body_bytes_; }
  // Once the headers are read: the most body bytes this request can bring (its Content-Length,
  // or the body limit for a chunked body; 0 without a body). The server reserves it whole.
  uint64_t body_bound() const { return body_bound_; }

  // Hands over the complete request and resets the parser for the next one.
  Request take_request();
  void reset();

 private:
  enum class Phase {
    request_line,
    headers,
    body_length,
    chunk_size,
    chunk_data,
    chunk_data_cr,
    chunk_data_lf,
    trailers,
    done
  };

  enum class Line { partial, complete, too_long };
  // Appends the bytes of the current line from data[pos..] to line_ and advances pos; complete
  // once its LF arrived (line_ then holds the line without CRLF / LF, line_bytes_ its length
  // with them). too_long, with nothing taken, when the line would exceed `limit` bytes.
  Line take_line(std::string_view data, size_t& pos, size_t limit);
  void parse_request_line();
  // A header or trailer field line: false (after failing) when malformed.
  bool parse_field_line(Header& out);
  void finish_headers();
  void parse_chunk_size();
  void fail(int status, std::string message);
  void append_body(std::string_view bytes);
  void complete();  // joins the body pieces into request_.body
  size_t feed_until(std::string_view data, bool stop_after_head);

  Limits limits_;
  Status status_ = Status::need_more;
  Phase phase_ = Phase::request_line;
  bool started_ = false;
  bool expects_continue_ = false;
  bool keep_alive_ = true;
  int error_status_ = 0;
  std::string error_message_;
  Request request_;
  std::string line_;
  size_t line_bytes_ = 0;
  size_t header_bytes_ = 0;  // request line + header lines (or trailer lines) consumed
  size_t trailer_count_ = 0;
  std::vector<std::string> body_pieces_;
  size_t body_bytes_ = 0;
  uint64_t body_bound_ = 0;
  uint64_t remaining_ = 0;  // body bytes (Content-Length) or bytes of this chunk left
};

}  // namespace deepinfer::http
