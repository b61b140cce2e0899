// The HTTP client's parsers on hand-written bytes: response heads, chunked bodies and SSE
// events, fed whole and one byte at a time (a network delivers any split).
#include "http/client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace deepinfer::http {
namespace {

std::string decode_chunked(const std::string& bytes, size_t step, bool* done = nullptr) {
  ChunkedDecoder decoder;
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += step) {
    const std::string_view piece = std::string_view(bytes).substr(i, step);
    const size_t used = decoder.feed(piece, out);
    if (decoder.done()) break;
    EXPECT_EQ(used, piece.size());
  }
  if (done) *done = decoder.done();
  return out;
}

TEST(HttpClientParse, UrlWithPortAndPrefix) {
  const Url u = parse_url("http://127.0.0.1:8000/api/");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8000);
  EXPECT_EQ(u.base_path, "/api");
  const Url plain = parse_url("http://localhost");
  EXPECT_EQ(plain.port, 80);
  EXPECT_EQ(plain.base_path, "");
  EXPECT_THROW(parse_url("https://x"), Error);
  EXPECT_THROW(parse_url("localhost:80"), Error);
  EXPECT_THROW(parse_url("http://h:99999"), Error);
}

TEST(HttpClientParse, RequestHasHostAndLength) {
  const Url u = parse_url("http://h:81/p");
  EXPECT_EQ(format_request("POST", "/v1/x", u, "{}", {{"Authorization", "Bearer k"}}),
            "POST /p/v1/x HTTP/1.1\r\nHost: h:81\r\nAuthorization: Bearer k\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
}

TEST(HttpClientParse, ResponseHead) {
  const std::string bytes =
      "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\ncontent-length:  12 \r\n\r\nbody";
  size_t consumed = 0;
  EXPECT_FALSE(parse_response_head(bytes.substr(0, 40), consumed));
  const auto head = parse_response_head(bytes, consumed);
  ASSERT_TRUE(head);
  EXPECT_EQ(consumed, bytes.size() - 4);
  EXPECT_EQ(head->status, 503);
  EXPECT_EQ(head->reason, "Service Unavailable");
  ASSERT_NE(head->header("Content-Length"), nullptr);
  EXPECT_EQ(*head->header("CONTENT-LENGTH"), "12");
  EXPECT_EQ(*head->header("retry-after"), "1");
  EXPECT_EQ(head->header("Transfer-Encoding"), nullptr);

  size_t n = 0;
  EXPECT_TRUE(parse_response_head("HTTP/1.1 204\r\n\r\n", n));  // empty reason phrase
  EXPECT_THROW(parse_response_head("HTTP/1.1 2x0 OK\r\n\r\n", n), Error);
  EXPECT_THROW(parse_response_head("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", n), Error);
}

TEST(HttpClientParse, ChunkedBodyInAnySplit) {
  // Two chunks (one with an extension), the last chunk, a trailer, then bytes of the next
  // response that must not be consumed.
  const std::string body = "5;ext=1\r\nhello\r\nB\r\n, world!!!!\r\n0\r\nX-T: y\r\n\r\n";
  for (size_t step : {body.size(), size_t{1}, size_t{3}, size_t{7}}) {
    bool done = false;
    EXPECT_EQ(decode_chunked(body, step, &done), "hello, world!!!!") << step;
    EXPECT_TRUE(done) << step;
  }
  ChunkedDecoder d;
  std::string out;
  const std::string with_next = "3\r\nabc\r\n0\r\n\r\nHTTP/1.1";
  EXPECT_EQ(d.feed(with_next, out), with_next.size() - 8);
  EXPECT_TRUE(d.done());
  EXPECT_EQ(out, "abc");
}

TEST(HttpClientParse, ChunkedBodyErrors) {
  std::string out;
  ChunkedDecoder bad_size;
  EXPECT_THROW(bad_size.feed("zz\r\n", out), Error);
  ChunkedDecoder no_crlf;
  EXPECT_THROW(no_crlf.feed("3\r\nabcXY\r\n", out), Error);
  ChunkedDecoder partial;
  EXPECT_EQ(partial.feed("4\r\nab", out), 5u);
  EXPECT_FALSE(partial.done());
}

TEST(HttpClientParse, SseEventsInAnySplit) {
  // What an OpenAI stream looks like, with a comment, CRLF and CR line ends, a multi-line
  // data field, a named event and a field without a space after the colon.
  const std::string stream =
      ": keep-alive\n\n"
      "data: {\"a\":1}\n\n"
      "data: line1\r\ndata:line2\r\n\r\n"
      "event: usage\rdata: {\"u\":2}\r\r"
      "id: 7\n\n"  // no data: not dispatched
      "data: [DONE]\n\n"
      "data: incomplete";
  for (size_t step : {stream.size(), size_t{1}, size_t{2}, size_t{5}}) {
    SseParser parser;
    std::vector<SseEvent> events;
    for (size_t i = 0; i < stream.size(); i += step) {
      for (auto& e : parser.feed(std::string_view(stream).substr(i, step))) {
        events.push_back(std::move(e));
      }
    }
    ASSERT_EQ(events.size(), 4u) << step;
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[0].event, "");
    EXPECT_EQ(events[1].data, "line1\nline2");
    EXPECT_EQ(events[2].event, "usage");
    EXPECT_EQ(events[2].data, "{\"u\":2}");
    EXPECT_EQ(events[3].data, "[DONE]");
  }
}

// A one-connection server on 127.0.0.1 that reads the request head, then writes `pieces`
// (pausing between them, so the client sees them in separate reads) and closes.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> pieces) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(listener_, 1);
    const timeval wait{5, 0};  // accept() gives up when the test never connects
    setsockopt(listener_, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
    thread_ = std::thread([this, pieces = std::move(pieces)] {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      request_ = request;
      for (const auto& piece : pieces) {
        // MSG_NOSIGNAL: a client that stops reading must fail its test, not kill the binary.
        EXPECT_EQ(send(fd, piece.data(), piece.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(piece.size()));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      close(fd);
    });
  }
  ~ScriptedServer() {
    if (thread_.joinable()) thread_.join();
    close(listener_);
  }
  Url url() const { return {"127.0.0.1", port_, ""}; }
  // The request it received, once it has written everything and closed.
  const std::string& request() {
    if (thread_.joinable()) thread_.join();
    return request_;
  }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string request_;
};

TEST(HttpClientSocket, ChunkedSseResponseReadIncrementally) {
  ScriptedServer server({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n",
                         "Content-Type: text/event-stream\r\n\r\n1",
                         "2\r\ndata: {\"a\":12345}\n\r\n", "1\r\n\n\r\n",
                         "E\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"});
  Connection conn = Connection::open("127.0.0.1", server.url().port, 5);
  conn.send(format_request("POST", "/v1/completions", server.url(), "{}", {}));
  ResponseReader response(conn);
  EXPECT_EQ(response.head().status, 200);
  SseParser sse;
  std::vector<std::string> data;
  std::string piece;
  int reads = 0;
  while (response.read_some(piece)) {
    ++reads;
    for (const auto& e : sse.feed(piece)) data.push_back(e.data);
  }
  EXPECT_EQ(data, (std::vector<std::string>{"{\"a\":12345}", "[DONE]"}));
  EXPECT_GE(reads, 2);  // the body came as it arrived, not at the end
  EXPECT_NE(server.request().find("POST /v1/completions HTTP/1.1\r\n"), std::string::npos);
}

TEST(HttpClientSocket, ContentLengthAndUntilClose) {
  {
    ScriptedServer server({"HTTP/1.1 503 Busy\r\nContent-Length: 5\r\n\r\nab", "cde"});
    const FetchResult r = fetch(server.url(), "GET", "/health", "", 5);
    EXPECT_EQ(r.head.status, 503);
    EXPECT_EQ(r.body, "abcde");
  }
  {
    ScriptedServer server({"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nno ", "length"});
    EXPECT_EQ(fetch(server.url(), "GET", "/", "", 5).body, "no length");
  }
}

TEST(HttpClientSocket, EarlyCloseIsAnError) {
  ScriptedServer server({"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"});
  try {
    fetch(server.url(), "GET", "/", "", 5);
    FAIL() << "a body cut short was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("before the end of the Content-Length body"),
              std::string::npos)
        << e.what();
  }
  ScriptedServer chunked({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"});
  EXPECT_THROW(fetch(chunked.url(), "GET", "/", "", 5), Error);
}

TEST(HttpClientSocket, ConnectRefusedNamesThePeer) {
  int port = 0;
  {
    ScriptedServer server({"HTTP/1.1 204 No Content\r\n\r\n"});
    port = server.url().port;
    EXPECT_EQ(fetch(server.url(), "GET", "/", "", 5).head.status, 204);
  }
  try {
    Connection::open("127.0.0.1", port, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(str_cat("connect to 127.0.0.1:", port)), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace deepinfer::http
