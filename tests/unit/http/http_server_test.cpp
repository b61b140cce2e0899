#include "http/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/test_client.h"

namespace deepinfer::http {
namespace {

using testing::TestClient;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

ServerConfig config_with(Limits limits = {}) {
  ServerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.limits = limits;
  config.worker_threads = 4;
  return config;
}

// Answers "<method> <path> <body>" for every request.
void echo(Request&& req, std::shared_ptr<Exchange> ex) {
  Response res;
  res.set_header("Content-Type", "text/plain");
  res.body = req.method + " " + req.path + " " + req.body;
  ex->respond(std::move(res));
}

const char kGet[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";

TEST(HttpServer, RespondsWithStatusLineDateServerAndLength) {
  HttpServer server(config_with(), echo);
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send(kGet));
  const auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->head.substr(0, r->head.find("\r\n")), "HTTP/1.1 200 OK");
  EXPECT_EQ(r->body, "GET /hello ");
  EXPECT_EQ(r->header("Content-Length"), "11");
  EXPECT_EQ(r->header("Server"), "deepinfer");
  EXPECT_EQ(r->header("Content-Type"), "text/plain");
  EXPECT_EQ(r->header("Date").size(), 29u);  // "Tue, 01 Dec 2026 11:08:21 GMT"
  EXPECT_EQ(r->header("Date").substr(25), " GMT");
  EXPECT_EQ(r->header("Connection"), "");
}

TEST(HttpServer, KeepAliveServesTwoRequestsOnOneConnection) {
  HttpServer server(config_with(), echo);
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "POST /a one");
  ASSERT_TRUE(client.send("GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /b ");
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(client.wait_closed());
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrderOneAtATime) {
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  HttpServer server(config_with(), [&](Request&& req, std::shared_ptr<Exchange> ex) {
    most = std::max(most.load(), ++running);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --running;
    echo(std::move(req), ex);
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send(
      "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
      "hiGET /3 HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (const char* want : {"GET /1 ", "POST /2 hi", "GET /3 "}) {
    const auto r = client.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, want);
  }
  EXPECT_EQ(most.load(), 1);
}

TEST(HttpServer, HeadSendsTheBodysLengthButNoBody) {
  HttpServer server(config_with(), echo);
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"));
  const auto r = client.read_response(2.0, /*head_request=*/true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("Content-Length"), "8");  // "HEAD /h "
  // Were a body sent, it would be read as the start of the next response.
  ASSERT_TRUE(client.send(kGet));
  const auto next = client.read_response();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body, "GET /hello ");
}

TEST(HttpServer, StreamsChunksWrittenFromAnotherThread) {
  std::vector<std::thread> streamers;
  std::mutex mutex;
  HttpServer server(config_with(), [&](Request&&, std::shared_ptr<Exchange> ex) {
    Response head;
    head.set_header("Content-Type", "text/event-stream");
    head.body = "first;";
    ex->start_stream(std::move(head));
    std::lock_guard<std::mutex> lock(mutex);
    streamers.emplace_back([ex] {
      for (int i = 0; i < 3; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        EXPECT_TRUE(ex->write_chunk("chunk" + std::to_string(i) + ";"));
      }
      EXPECT_TRUE(ex->write_chunk(""));  // empty: nothing sent, the stream goes on
      ex->end_stream();
      EXPECT_FALSE(ex->write_chunk("late"));
    });
  });
  server.start();
  TestClient client(server.port());
  for (int round = 0; round < 2; ++round) {  // the connection stays usable after a stream
    ASSERT_TRUE(client.send(kGet));
    const auto r = client.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->header("Transfer-Encoding"), "chunked");
    EXPECT_EQ(r->header("Content-Length"), "");
    EXPECT_EQ(r->body, "first;chunk0;chunk1;chunk2;");
  }
  server.stop(1.0);
  for (auto& t : streamers) t.join();
}

TEST(HttpServer, Http10StreamEndsWithTheConnection) {
  HttpServer server(config_with(), [](Request&&, std::shared_ptr<Exchange> ex) {
    ex->start_stream(Response{});
    ex->write_chunk("a");
    ex->write_chunk("b");
    ex->end_stream();
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET / HTTP/1.0\r\n\r\n"));
  const auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("Transfer-Encoding"), "");
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_EQ(r->body, "ab");
}

TEST(HttpServer, SendsContinueBeforeTheBody) {
  HttpServer server(config_with(), echo);
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send(
      "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  ASSERT_TRUE(client.read_until("HTTP/1.1 100 Continue\r\n\r\n"));
  EXPECT_EQ(client.buffered(), "HTTP/1.1 100 Continue\r\n\r\n");
  const auto interim = client.read_response();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client.send("data"));
  const auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "POST /up data");
}

TEST(HttpServer, ChunkedBodyOverTheLimitIs413ReadByTheClientThenClosed) {
  Limits limits;
  limits.max_body_bytes = 1000;
  std::atomic<int> handled{0};
  std::atomic<int> reported{0};
  ServerConfig config = config_with(limits);
  config.on_response = [&](const Request& req, int status) {
    if (status == 413 && req.method == "POST") ++reported;
  };
  HttpServer server(config, [&](Request&&, std::shared_ptr<Exchange> ex) {
    ++handled;
    ex->respond(Response{});
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(
      client.send("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "200\r\n" +
                  std::string(512, 'a') + "\r\n200\r\n" + std::string(512, 'b')));
  // The client goes on sending: lingering discards it instead of resetting the connection.
  client.send(std::string(64 * 1024, 'c'));
  const auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_NE(r->body.find("\"error\""), std::string::npos);
  EXPECT_TRUE(client.wait_closed(1.5));
  EXPECT_EQ(handled.load(), 0);
  EXPECT_EQ(reported.load(), 1);
}

TEST(HttpServer, ParserErrorsAreAnsweredWithTheirStatus) {
  ServerConfig config = config_with();
  config.error_response = [](int status, const std::string& message) {
    Response r;
    r.body = "custom " + std::to_string(status) + ": " + message;
    return r;
  };
  HttpServer server(config, echo);
  server.start();
  const std::pair<const char*, int> cases[] = {
      {"POST /x HTTP/1.1\r\nHost: x\r\n\r\nbody", 411},
      {"GET / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n", 413},
  };
  for (const auto& [request, status] : cases) {
    TestClient client(server.port());
    ASSERT_TRUE(client.send(request));
    const auto r = client.read_response();
    ASSERT_TRUE(r) << request;
    EXPECT_EQ(r->status, status) << request;
    EXPECT_EQ(r->body.rfind("custom " + std::to_string(status) + ": ", 0), 0u) << r->body;
    EXPECT_TRUE(client.wait_closed());
  }
}

TEST(HttpServer, HandlerExceptionsAndUnansweredExchangesAre500) {
  HttpServer server(config_with(), [](Request&& req, std::shared_ptr<Exchange>) {
    if (req.path == "/throw") throw std::runtime_error("boom");
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("boom"), std::string::npos);
  ASSERT_TRUE(client.send(kGet));
  r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
}

TEST(HttpServer, TricklingRequestGets408AtTheRequestTimeout) {
  Limits limits;
  limits.request_timeout_s = 0.3;
  HttpServer server(config_with(limits), echo);
  server.start();
  TestClient client(server.port());
  const auto start = Clock::now();
  const std::string request = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  std::optional<testing::ClientResponse> r;
  for (size_t i = 0; i + 1 < request.size() && !r; ++i) {
    if (!client.send(request.substr(i, 1))) break;
    r = client.read_response(0.02);
  }
  if (!r) r = client.read_response(1.0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_GE(seconds_since(start), 0.28);
  EXPECT_LT(seconds_since(start), 1.5);  // slack for a loaded CI machine
  EXPECT_TRUE(client.wait_closed());
}

TEST(HttpServer, IdleKeepAliveConnectionIsClosedAfterItsTimeout) {
  Limits limits;
  limits.keep_alive_timeout_s = 0.2;
  HttpServer server(config_with(limits), echo);
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send(kGet));
  ASSERT_TRUE(client.read_response());
  const auto start = Clock::now();
  EXPECT_TRUE(client.wait_closed(2.0));
  EXPECT_GE(seconds_since(start), 0.15);
  EXPECT_LT(seconds_since(start), 1.5);
}

TEST(HttpServer, OnCloseFiresWhenTheClientLeavesDuringAStream) {
  std::promise<std::thread::id> closed;
  std::shared_ptr<Exchange> kept;
  std::mutex mutex;
  HttpServer server(config_with(), [&](Request&&, std::shared_ptr<Exchange> ex) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      kept = ex;  // an open stream holds no thread
    }
    ex->on_close([&closed] { closed.set_value(std::this_thread::get_id()); });
    ex->start_stream(Response{});
  });
  server.start();
  {
    TestClient client(server.port());
    ASSERT_TRUE(client.send(kGet));
    ASSERT_TRUE(client.read_until("\r\n\r\n"));
  }
  auto fired = closed.get_future();
  ASSERT_EQ(fired.wait_for(std::chrono::seconds(1)), std::future_status::ready);
  EXPECT_NE(fired.get(), std::this_thread::get_id());
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_TRUE(kept->closed());
  EXPECT_FALSE(kept->write_chunk("gone"));
  bool late = false;
  kept->on_close([&late] { late = true; });  // already closed: runs at once
  EXPECT_TRUE(late);
  EXPECT_EQ(server.active_exchanges(), 0u);
}

TEST(HttpServer, HalfClosedClientsGetTheirResponse) {
  // Sends the request and shuts down its sending side (as `nc -N`): a quick answer comes
  // plain, a slow one after an interim 100 Continue (the probe for a client that left).
  std::atomic<int> delay_ms{0};
  HttpServer server(config_with(), [&](Request&& req, std::shared_ptr<Exchange> ex) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    echo(std::move(req), std::move(ex));
  });
  server.start();
  for (const int delay : {0, 700}) {
    delay_ms = delay;
    for (int i = 0; i < (delay > 0 ? 2 : 10); ++i) {
      TestClient client(server.port());
      ASSERT_TRUE(client.send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"));
      client.shut_write();
      auto response = client.read_response(5.0);
      if (delay > 0) {
        ASSERT_TRUE(response);
        EXPECT_EQ(response->status, 100);
        response = client.read_response(5.0);
      }
      ASSERT_TRUE(response) << "delay " << delay << ", try " << i;
      EXPECT_EQ(response->status, 200);
      EXPECT_EQ(response->body, "POST /x hi");
      EXPECT_TRUE(client.wait_closed());
    }
  }
}

TEST(HttpServer, AClosedClientOfASlowHandlerIsNoticedByTheProbe) {
  std::promise<void> closed;
  std::shared_ptr<Exchange> kept;
  std::mutex mutex;
  HttpServer server(config_with(), [&](Request&&, std::shared_ptr<Exchange> ex) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      kept = ex;  // never answered
    }
    ex->on_close([&closed] { closed.set_value(); });
  });
  server.start();
  {
    TestClient client(server.port());
    ASSERT_TRUE(client.send(kGet));
  }  // closed, not half-closed: TCP shows the server the same FIN
  const auto start = Clock::now();
  auto fired = closed.get_future();
  ASSERT_EQ(fired.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_LT(seconds_since(start), 1.0);
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_TRUE(kept->closed());
}

TEST(HttpServer, OutputBeyondTheLimitClosesAClientThatDoesNotRead) {
  Limits limits;
  limits.max_output_bytes = 64 * 1024;
  std::promise<void> closed;
  std::promise<bool> last_write;
  HttpServer server(config_with(limits), [&](Request&&, std::shared_ptr<Exchange> ex) {
    ex->on_close([&closed] { closed.set_value(); });
    ex->start_stream(Response{});
    const std::string chunk(16 * 1024, 'z');
    bool ok = true;
    for (int i = 0; i < 4096 && ok; ++i) ok = ex->write_chunk(chunk);  // up to 64 MB
    last_write.set_value(ok);
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send(kGet));  // and never reads
  auto wrote = last_write.get_future();
  ASSERT_EQ(wrote.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  EXPECT_FALSE(wrote.get());
  EXPECT_EQ(closed.get_future().wait_for(std::chrono::seconds(1)), std::future_status::ready);
}

TEST(HttpServer, StopEndsInBoundsWithIdleTricklingAndStreamingClients) {
  std::atomic<int> closes{0};
  std::shared_ptr<Exchange> stream;
  std::mutex mutex;
  HttpServer server(config_with(), [&](Request&& req, std::shared_ptr<Exchange> ex) {
    if (req.path != "/stream") return echo(std::move(req), ex);
    ex->on_close([&closes] { ++closes; });
    ex->start_stream(Response{});
    ex->write_chunk("tick");
    std::lock_guard<std::mutex> lock(mutex);
    stream = ex;
  });
  server.start();
  TestClient idle(server.port());
  ASSERT_TRUE(idle.send(kGet));
  ASSERT_TRUE(idle.read_response());
  TestClient trickler(server.port());
  ASSERT_TRUE(trickler.send("GET /tr"));
  TestClient streaming(server.port());
  ASSERT_TRUE(streaming.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(streaming.read_until("tick"));
  EXPECT_EQ(server.active_exchanges(), 1u);

  const auto start = Clock::now();
  server.stop(0.3);
  const double took = seconds_since(start);
  EXPECT_GE(took, 0.25);  // the stream was given its grace
  EXPECT_LT(took, 1.0);   // grace + a fraction of a second
  EXPECT_EQ(closes.load(), 1);
  EXPECT_TRUE(idle.wait_closed(0.5));
  EXPECT_TRUE(trickler.wait_closed(0.5));
  EXPECT_TRUE(streaming.wait_closed(0.5));
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_FALSE(stream->write_chunk("after stop"));
  stream->end_stream();  // ignored
  server.stop(1.0);      // idempotent
}

TEST(HttpServer, StopLetsAFinishingResponseOutWithConnectionClose) {
  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future().share();
  HttpServer server(config_with(), [&](Request&& req, std::shared_ptr<Exchange> ex) {
    entered.set_value();
    released.wait();
    echo(std::move(req), ex);
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send(kGet));
  entered.get_future().wait();
  server.stop_accepting();
  TestClient late(server.port());
  EXPECT_FALSE(late.connected());  // the listening socket is closed
  std::thread stopper([&] { server.stop(2.0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  release.set_value();
  const auto r = client.read_response();
  stopper.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /hello ");
  EXPECT_EQ(r->header("Connection"), "close");
}

TEST(HttpServer, StopClosesARunningHandlersExchangeAndWaitsForTheHandler) {
  std::promise<void> entered;
  std::atomic<bool> handler_done{false};
  std::shared_ptr<Exchange> kept;
  HttpServer server(config_with(), [&](Request&&, std::shared_ptr<Exchange> ex) {
    auto gone = std::make_shared<std::promise<void>>();
    ex->on_close([gone] { gone->set_value(); });
    entered.set_value();
    // A long handler that gives up when its client is gone (the engine's abort).
    EXPECT_EQ(gone->get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_TRUE(ex->closed());
    ex->respond(Response{});  // ignored
    kept = ex;
    handler_done = true;
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send(kGet));
  entered.get_future().wait();
  const auto start = Clock::now();
  server.stop(0.1);
  EXPECT_LT(seconds_since(start), 0.8);
  EXPECT_TRUE(handler_done.load());  // joined
  EXPECT_TRUE(client.wait_closed(0.5));
  EXPECT_EQ(server.active_exchanges(), 0u);
}

TEST(HttpServer, AnExchangeKeptPastTheServerIsHarmless) {
  std::shared_ptr<Exchange> kept;
  {
    HttpServer server(config_with(), [&](Request&&, std::shared_ptr<Exchange> ex) {
      ex->start_stream(Response{});
      kept = ex;
    });
    server.start();
    TestClient client(server.port());
    ASSERT_TRUE(client.send(kGet));
    ASSERT_TRUE(client.read_until("\r\n\r\n"));
  }
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->closed());
  EXPECT_FALSE(kept->write_chunk("x"));
  kept->end_stream();
  EXPECT_EQ(kept->queued_bytes(), 0u);
}

TEST(HttpServer, OnResponseSeesEveryStatusWithItsRequest) {
  std::mutex mutex;
  std::vector<std::string> seen;
  ServerConfig config = config_with();
  config.on_response = [&](const Request& req, int status) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(req.method + " " + req.target + " " + std::to_string(status));
  };
  HttpServer server(config, [](Request&& req, std::shared_ptr<Exchange> ex) {
    Response res;
    res.status = req.path == "/missing" ? 404 : 200;
    ex->respond(std::move(res));
  });
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(
      client.send("GET /ok?a=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                  "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n"
                  "GET / HTTP/1.1\r\n\r\n"));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client.read_response());
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(seen, (std::vector<std::string>{"GET /ok?a=1 200", "GET /missing 404", "GET / 400"}));
}

TEST(HttpServer, Http10KeepsTheConnectionOnlyWhenAsked) {
  HttpServer server(config_with(), echo);
  server.start();
  TestClient client(server.port());
  ASSERT_TRUE(client.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("Connection"), "keep-alive");
  ASSERT_TRUE(client.send("GET /b HTTP/1.0\r\n\r\n"));
  r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /b ");
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(client.wait_closed());
}

TEST(HttpServer, NormalRequestsAreServedWhileManyClientsTrickle) {
  ServerConfig config = config_with();
  config.worker_threads = 2;  // tricklers hold no thread, so two are plenty
  HttpServer server(config, echo);
  server.start();
  std::vector<std::unique_ptr<TestClient>> tricklers;
  for (int i = 0; i < 100; ++i) {
    tricklers.push_back(std::make_unique<TestClient>(server.port()));
    ASSERT_TRUE(tricklers.back()->send("GET /slow HTTP/1.1\r\nHo"));
  }
  for (int i = 0; i < 4; ++i) {
    for (auto& t : tricklers) t->send("s");
    const auto start = Clock::now();
    TestClient client(server.port());
    ASSERT_TRUE(client.send(kGet));
    const auto r = client.read_response(1.0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(seconds_since(start), 1.0);
  }
}

TEST(HttpServer, BeyondMaxConnectionsNewOnesGet503) {
  Limits limits;
  limits.max_connections = 2;
  HttpServer server(config_with(limits), echo);
  server.start();
  TestClient a(server.port());
  TestClient b(server.port());
  for (TestClient* c : {&a, &b}) {
    ASSERT_TRUE(c->send(kGet));
    ASSERT_TRUE(c->read_response());
  }
  TestClient c(server.port());
  ASSERT_TRUE(c.send(kGet));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(c.wait_closed());
  a.close();
  // Once a slot is free, connections are served again.
  for (int attempt = 0; attempt < 50; ++attempt) {
    TestClient d(server.port());
    ASSERT_TRUE(d.send(kGet));
    const auto again = d.read_response();
    ASSERT_TRUE(again);
    if (again->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL() << "a freed connection slot was never reused";
}

TEST(HttpServer, BodiesBeyondTheBufferedBudgetWaitUntilAHandlerReturns) {
  Limits limits;
  limits.max_buffered_body_bytes = 1000;
  std::promise<void> first_in;
  std::promise<void> release_first;
  auto released = release_first.get_future().share();
  std::atomic<int> second_ran{0};
  HttpServer server(config_with(limits), [&](Request&& req, std::shared_ptr<Exchange> ex) {
    if (req.path == "/first") {
      first_in.set_value();
      released.wait();
    } else {
      ++second_ran;
    }
    Response res;
    res.body = std::to_string(req.body.size());
    ex->respond(std::move(res));
  });
  server.start();
  TestClient first(server.port());
  ASSERT_TRUE(first.send("POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: 1200\r\n\r\n" +
                         std::string(1200, 'a')));
  first_in.get_future().wait();
  TestClient second(server.port());
  ASSERT_TRUE(second.send("POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"));
  ASSERT_TRUE(second.send(std::string(10, 'b')));
  EXPECT_FALSE(second.read_response(0.2));  // its body is not read while over budget
  EXPECT_EQ(second_ran.load(), 0);
  release_first.set_value();
  const auto r1 = first.read_response();
  const auto r2 = second.read_response();
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r1->body, "1200");
  EXPECT_EQ(r2->body, "10");
}

TEST(HttpServer, ListensOnIpv6AndFailsClearlyOnABadHost) {
  ServerConfig config = config_with();
  config.host = "::1";
  try {
    HttpServer server(config, echo);
    EXPECT_GT(server.port(), 0);
    config.host = "[::1]";
    HttpServer bracketed(config, echo);
    EXPECT_GT(bracketed.port(), 0);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  config.host = "256.1.1.1";
  EXPECT_THROW(HttpServer(config, echo), std::exception);
}

}  // namespace
}  // namespace deepinfer::http
