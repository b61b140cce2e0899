#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace deepinfer::http {
namespace {

struct Outcome {
  RequestParser::Status status;
  int error_status = 0;
  Request request;
  size_t consumed = 0;
  bool keep_alive = false;
  bool expects_continue = false;
};

// Feeds `pieces` one after another and reports where the parser ended up.
Outcome feed_pieces(const std::vector<std::string>& pieces, const Limits& limits) {
  RequestParser parser(limits);
  Outcome out;
  for (const std::string& piece : pieces) {
    out.consumed += parser.feed(piece);
    if (parser.expects_continue()) out.expects_continue = true;
    if (parser.status() != RequestParser::Status::need_more) break;
  }
  out.status = parser.status();
  out.error_status = parser.error_status();
  out.keep_alive = parser.keep_alive();
  if (out.status == RequestParser::Status::complete) out.request = parser.take_request();
  return out;
}

Outcome parse(const std::string& text, const Limits& limits = {}) {
  return feed_pieces({text}, limits);
}

// The error status of `text` (0 when it parses, -1 when it needs more).
int status_of(const std::string& text, const Limits& limits = {}) {
  const Outcome o = parse(text, limits);
  if (o.status == RequestParser::Status::complete) return 0;
  if (o.status == RequestParser::Status::need_more) return -1;
  return o.error_status;
}

TEST(HttpRequestParser, ParsesAGetWithHeadersPathAndQuery) {
  const Outcome o = parse(
      "GET /v1/models/a%2Fb%20c?x=1&y=%41 HTTP/1.1\r\nHost: h\r\n"
      "X-Thing:   padded value \t\r\n\r\n");
  ASSERT_EQ(o.status, RequestParser::Status::complete);
  EXPECT_EQ(o.request.method, "GET");
  EXPECT_EQ(o.request.target, "/v1/models/a%2Fb%20c?x=1&y=%41");
  EXPECT_EQ(o.request.path, "/v1/models/a/b c");
  EXPECT_EQ(o.request.query, "x=1&y=%41");
  EXPECT_EQ(o.request.version_minor, 1);
  ASSERT_EQ(o.request.headers.size(), 2u);
  EXPECT_EQ(o.request.headers[1].name, "X-Thing");
  EXPECT_EQ(o.request.headers[1].value, "padded value");
  ASSERT_NE(o.request.header("x-THING"), nullptr);
  EXPECT_EQ(*o.request.header("x-thing"), "padded value");
  EXPECT_EQ(o.request.header("absent"), nullptr);
  EXPECT_TRUE(o.request.body.empty());
  EXPECT_TRUE(o.keep_alive);
}

TEST(HttpRequestParser, AcceptsBareLfLineEndsAndLeadingEmptyLines) {
  const Outcome o = parse("\r\n\nPOST /x HTTP/1.1\nHost: h\nContent-Length: 3\n\nabc");
  ASSERT_EQ(o.status, RequestParser::Status::complete);
  EXPECT_EQ(o.request.method, "POST");
  EXPECT_EQ(o.request.body, "abc");
}

TEST(HttpRequestParser, StopsAfterOneRequestSoPipelinedBytesStay) {
  const std::string first = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string second = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
  RequestParser parser(Limits{});
  const std::string both = first + second;
  EXPECT_EQ(parser.feed(both), first.size());
  ASSERT_EQ(parser.status(), RequestParser::Status::complete);
  EXPECT_EQ(parser.feed("more"), 0u);  // nothing taken until the request is handed over
  EXPECT_EQ(parser.take_request().path, "/a");
  EXPECT_EQ(parser.feed(std::string_view(both).substr(first.size())), second.size());
  EXPECT_EQ(parser.take_request().path, "/b");
}

TEST(HttpRequestParser, RequestLineRules) {
  EXPECT_EQ(status_of("GET / HTTP/1.0\r\n\r\n"), 0);  // 1.0 needs no Host
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/1.2\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/0.9\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTPS/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);  // two spaces
  EXPECT_EQ(status_of("GET /\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("G(T / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET * HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
  EXPECT_EQ(status_of("GET /a\rb HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);  // raw non-ASCII
}

TEST(HttpRequestParser, RequestLineLimitIs414AndDetectedBeforeTheLineEnds) {
  Limits limits;
  limits.max_request_line_bytes = 32;
  const std::string fits = "GET /" + std::string(32 - 14, 'a') + " HTTP/1.1";  // 32 bytes
  ASSERT_EQ(fits.size(), 32u);
  EXPECT_EQ(status_of(fits + "\r\nHost: h\r\n\r\n", limits), 0);
  EXPECT_EQ(status_of("GET /" + std::string(32 - 13, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", limits),
            414);
  // No line end at all: 414 as soon as the limit is passed, not at the end of the bytes.
  RequestParser parser(limits);
  parser.feed("GET /" + std::string(100, 'a'));
  EXPECT_EQ(parser.status(), RequestParser::Status::error);
  EXPECT_EQ(parser.error_status(), 414);
}

TEST(HttpRequestParser, PercentDecodingRules) {
  EXPECT_EQ(status_of("GET /a%00b HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /a%zzb HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /a%4 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /a% HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  // The query is kept raw: bad escapes there are the application's business.
  EXPECT_EQ(status_of("GET /a?q=%zz%00 HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
  EXPECT_EQ(parse("GET /a+b%2B HTTP/1.1\r\nHost: h\r\n\r\n").request.path, "/a+b+");
}

TEST(HttpRequestParser, HeaderRules) {
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), 400);  // HTTP/1.1 without Host
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost : h\r\n\r\n"), 400);  // space before ':'
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\n: empty name\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n\tfolded\r\n\r\n"), 400);
  EXPECT_EQ(status_of(std::string("GET / HTTP/1.1\r\nHost: h\r\nA: b\0c\r\n\r\n", 35)), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nA: b\rc\r\n\r\n"), 400);  // bare CR
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nA: b\tc \r\n\r\n"), 0);   // HT is fine
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\nA: \xff\r\n\r\n").status,
            RequestParser::Status::complete);  // obs-text is allowed
}

TEST(HttpRequestParser, HeaderCountAndSizeLimitsAre431WhileReading) {
  Limits limits;
  limits.max_header_count = 3;
  limits.max_header_bytes = 200;
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits), 0);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits), 431);
  // One long header without its end: 431 once the total passes 200 bytes, not later.
  RequestParser parser(limits);
  const std::string start = "GET / HTTP/1.1\r\nHost: h\r\nA: ";
  EXPECT_EQ(parser.feed(start + std::string(200 - start.size(), 'x')), 200u);
  EXPECT_EQ(parser.status(), RequestParser::Status::need_more);
  parser.feed("x");
  EXPECT_EQ(parser.status(), RequestParser::Status::error);
  EXPECT_EQ(parser.error_status(), 431);
  // Exactly at the limit (the final empty line included) is fine.
  const std::string head = "GET / HTTP/1.1\r\nHost: h\r\nA: ";
  const std::string exact = head + std::string(200 - head.size() - 4, 'y') + "\r\n\r\n";
  ASSERT_EQ(exact.size(), 200u);
  EXPECT_EQ(status_of(exact, limits), 0);
  EXPECT_EQ(status_of(head + std::string(200 - head.size() - 3, 'y') + "\r\n\r\n", limits), 431);
}

TEST(HttpRequestParser, AMillionHeadersStopAtTheCountLimit) {
  std::string text = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 200; ++i) text += "X: 1\r\n";
  RequestParser parser(Limits{});
  const size_t used = parser.feed(text);
  EXPECT_EQ(parser.error_status(), 431);
  EXPECT_LE(parser.request().headers.size(), Limits{}.max_header_count);
  EXPECT_LT(used, text.size());
}

TEST(HttpRequestParser, ContentLengthRules) {
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\n";
  EXPECT_EQ(status_of(head + "Content-Length: 3\r\n\r\nabc"), 0);
  EXPECT_EQ(parse(head + "Content-Length: 3\r\n\r\nabcdef").request.body, "abc");
  EXPECT_EQ(status_of(head + "Content-Length: 3\r\n\r\nab"), -1);
  EXPECT_EQ(status_of(head + "Content-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: +5\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 1,2\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 0x10\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: \r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 1234567890123456789\r\n\r\n"), 400);  // 19 digits
  EXPECT_EQ(status_of(head + "Content-Length: 123456789012345678\r\n\r\n"), 413);   // 18 digits
  EXPECT_EQ(status_of(head + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc"), 0);
  EXPECT_EQ(status_of(head + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Transfer-Encoding: gzip\r\n\r\n"), 501);
  EXPECT_EQ(status_of(head + "Transfer-Encoding: gzip, chunked\r\n\r\n"), 501);
  EXPECT_EQ(status_of(head + "\r\n"), 411);
  EXPECT_EQ(status_of("PUT /x HTTP/1.1\r\nHost: h\r\n\r\n"), 411);
  EXPECT_EQ(status_of("PATCH /x HTTP/1.0\r\n\r\n"), 411);
  EXPECT_EQ(status_of("DELETE /x HTTP/1.1\r\nHost: h\r\n\r\n"), 0);  // no body
}

TEST(HttpRequestParser, ContentLengthOverTheLimitIs413BeforeAnyBodyByte) {
  Limits limits;
  limits.max_body_bytes = 10;
  RequestParser parser(limits);
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
  EXPECT_EQ(parser.feed(head + "0123456789a"), head.size());
  EXPECT_EQ(parser.error_status(), 413);
  EXPECT_EQ(parser.body_bytes(), 0u);
  EXPECT_EQ(
      status_of("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789", limits), 0);
}

TEST(HttpRequestParser, BodiesLargerThanOnePieceArriveWhole) {
  std::string body;
  for (size_t i = 0; i < 2 * kBodyPieceBytes + 12345; ++i)
    body.push_back(static_cast<char>('a' + i % 26));
  const std::string text =
      "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
      body;
  std::vector<std::string> pieces;
  for (size_t at = 0; at < text.size(); at += 65536) pieces.push_back(text.substr(at, 65536));
  const Outcome o = feed_pieces(pieces, Limits{});
  ASSERT_EQ(o.status, RequestParser::Status::complete);
  EXPECT_EQ(o.request.body, body);
  std::string chunked = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 700000) {
    const std::string part = body.substr(at, 700000);
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", part.size());
    chunked += size + part + "\r\n";
  }
  EXPECT_EQ(parse(chunked + "0\r\n\r\n").request.body, body);
}

TEST(HttpRequestParser, ChunkedBodies) {
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n";
  Outcome o = parse(head + "3\r\nabc\r\nA;name=value\r\n0123456789\r\n0\r\n\r\n");
  ASSERT_EQ(o.status, RequestParser::Status::complete);
  EXPECT_EQ(o.request.body, "abc0123456789");
  o = parse(head + "3 ; ext\nabc\n0\nTrailer-A: 1\nTrailer-B: 2\n\n");  // bare LF, trailers
  ASSERT_EQ(o.status, RequestParser::Status::complete);
  EXPECT_EQ(o.request.body, "abc");
  EXPECT_EQ(o.request.headers.size(), 2u);                     // trailers are dropped
  EXPECT_EQ(status_of(head + "3\r\nabcX\r\n0\r\n\r\n"), 400);  // no CRLF after the data
  EXPECT_EQ(status_of(head + "3\r\nabc\rX0\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "g\r\n"), 400);
  EXPECT_EQ(status_of(head + "\r\n"), 400);
  EXPECT_EQ(status_of(head + "3x\r\n"), 400);
  EXPECT_EQ(status_of(head + "-3\r\n"), 400);
  EXPECT_EQ(status_of(head + "00000000000000001\r\n"), 400);  // 17 hex digits
  EXPECT_EQ(status_of(head + "ffffffffffffffff\r\n"), 413);   // 16 digits: no overflow, 413
  EXPECT_EQ(status_of(head + "1;" + std::string(5000, 'e') + "\r\n"), 400);
  EXPECT_EQ(status_of(head + "0\r\nBad Trailer: 1\r\n\r\n"), 400);
}

TEST(HttpRequestParser, ChunkedTotalOverTheLimitIs413AsSoonAsKnown) {
  Limits limits;
  limits.max_body_bytes = 10;
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(status_of(head + "a\r\n0123456789\r\n0\r\n\r\n", limits), 0);
  RequestParser parser(limits);
  const std::string upto = head + "6\r\n012345\r\n5\r\n";
  EXPECT_EQ(parser.feed(upto + "01234\r\n0\r\n\r\n"), upto.size());
  EXPECT_EQ(parser.error_status(), 413);
  EXPECT_EQ(parser.body_bytes(), 6u);
}

TEST(HttpRequestParser, TrailersAreBoundedByTheHeaderLimits) {
  Limits limits;
  limits.max_header_count = 4;
  std::string text = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  for (int i = 0; i < 5; ++i) text += "T: 1\r\n";
  EXPECT_EQ(status_of(text + "\r\n", limits), 431);
  limits = Limits{};
  limits.max_header_bytes = 100;
  EXPECT_EQ(status_of("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " +
                          std::string(200, 'x'),
                      limits),
            431);
}

TEST(HttpRequestParser, KeepAliveAndExpect) {
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n";
  EXPECT_TRUE(parse(head + "Content-Length: 3\r\n\r\n").expects_continue);
  EXPECT_TRUE(parse(head + "Transfer-Encoding: chunked\r\n\r\n").expects_continue);
  EXPECT_FALSE(parse(head + "Content-Length: 0\r\n\r\n").expects_continue);
  EXPECT_FALSE(parse("POST /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
                   .expects_continue);
}

// Every split of the input into two pieces, and byte by byte, parses as the whole does.
void expect_split_invariant(const std::string& text, const Limits& limits = {}) {
  const Outcome whole = parse(text, limits);
  std::vector<std::string> bytes;
  for (const char c : text) bytes.emplace_back(1, c);
  std::vector<std::vector<std::string>> feeds = {bytes};
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    feeds.push_back({text.substr(0, cut), text.substr(cut)});
  }
  for (const auto& pieces : feeds) {
    const Outcome o = feed_pieces(pieces, limits);
    SCOPED_TRACE(testing::Message() << "first piece " << pieces.front().size() << " bytes");
    ASSERT_EQ(o.status, whole.status);
    ASSERT_EQ(o.error_status, whole.error_status);
    // How far an error got into the bytes depends on the split; nothing else does.
    if (o.status != RequestParser::Status::error) {
      ASSERT_EQ(o.consumed, whole.consumed);
    }
    ASSERT_EQ(o.request.body, whole.request.body);
    ASSERT_EQ(o.request.path, whole.request.path);
    ASSERT_EQ(o.request.headers.size(), whole.request.headers.size());
    ASSERT_EQ(o.expects_continue, whole.expects_continue);
  }
}

TEST(HttpRequestParser, EverySplitGivesTheSameResult) {
  Limits small;
  small.max_body_bytes = 8;
  small.max_header_bytes = 80;
  small.max_request_line_bytes = 30;
  expect_split_invariant("GET /a%20b?q HTTP/1.1\r\nHost: h\r\nA:  b \r\n\r\nGET / HTTP/1.1\r\n");
  expect_split_invariant("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloEXTRA");
  expect_split_invariant(
      "POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2;e=1\r\nhe\r\n3\r\nllo\r\n0\r\nT: v\r\n\r\nNEXT");
  expect_split_invariant(
      "POST /x HTTP/1.1\nHost: h\nTransfer-Encoding: chunked\n\n4\nabcd\n"
      "5\nefghi\n0\n\n",
      small);  // 413 on the second chunk
  expect_split_invariant("GET /" + std::string(40, 'a') + " HTTP/1.1\r\n", small);  // 414
  expect_split_invariant("GET / HTTP/1.1\r\nHost: h\r\nA: " + std::string(80, 'a'), small);
}

}  // namespace
}  // namespace deepinfer::http
