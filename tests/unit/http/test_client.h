#pragma once
// A blocking loopback client for the server tests: raw bytes out, responses parsed just enough
// (status, headers, Content-Length / chunked / until-close bodies) to check what came back.
// Header-only: the unit-test binary is built from *_test.cpp files.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace deepinfer::http::testing {

struct ClientResponse {
  int status = 0;
  std::string head;                                 // status line and headers
  std::string body;                                 // de-chunked
  std::string header(std::string_view name) const;  // first value, "" when absent
};

class TestClient {
 public:
  explicit TestClient(int port);
  ~TestClient() { close(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // false when the server has closed or reset the connection.
  bool send(std::string_view bytes);
  void shut_write() { ::shutdown(fd_, SHUT_WR); }
  void close();

  // The next response; nullopt when none came within `timeout_s` or the connection ended
  // before a complete one. `head_request`: no body follows the head.
  std::optional<ClientResponse> read_response(double timeout_s = 2.0, bool head_request = false);
  // Reads (and drops) until the server closes; true when it did within `timeout_s`.
  bool wait_closed(double timeout_s = 2.0);
  // Everything received so far that no response took (e.g. a 100 Continue line).
  std::string_view buffered() const { return buffer_; }
  // Reads until `text` has arrived; false on timeout or close.
  bool read_until(std::string_view text, double timeout_s = 2.0);

 private:
  // Reads once (waiting up to the deadline): false on timeout, close or error.
  bool fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

inline std::string ClientResponse::header(std::string_view name) const {
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos && pos + 2 < head.size()) {
    const size_t begin = pos + 2;
    const size_t end = head.find("\r\n", begin);
    const std::string_view line(head.data() + begin,
                                (end == std::string::npos ? head.size() : end) - begin);
    const size_t colon = line.find(':');
    if (colon == name.size()) {
      bool same = true;
      for (size_t i = 0; i < colon; ++i) {
        if (std::tolower(static_cast<unsigned char>(line[i])) !=
            std::tolower(static_cast<unsigned char>(name[i]))) {
          same = false;
        }
      }
      if (same) {
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        return std::string(value);
      }
    }
    pos = end;
  }
  return "";
}

inline TestClient::TestClient(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) close();
  const int one = 1;
  if (fd_ >= 0) setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

inline void TestClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

inline bool TestClient::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

inline bool TestClient::fill(std::chrono::steady_clock::time_point deadline) {
  if (eof_ || fd_ < 0) return false;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
  char chunk[65536];
  const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

inline bool TestClient::read_until(std::string_view text, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  while (buffer_.find(text) == std::string::npos) {
    if (!fill(deadline)) return false;
  }
  return true;
}

inline bool TestClient::wait_closed(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  while (fill(deadline)) buffer_.clear();
  return eof_;
}

inline std::optional<ClientResponse> TestClient::read_response(double timeout_s,
                                                               bool head_request) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill(deadline)) return std::nullopt;
  }
  ClientResponse r;
  r.head = buffer_.substr(0, head_end);
  if (r.head.size() < 12 || r.head.compare(0, 9, "HTTP/1.1 ") != 0) return std::nullopt;
  r.status = std::atoi(r.head.c_str() + 9);
  size_t pos = head_end + 4;
  const std::string length = r.header("Content-Length");
  const bool no_body = head_request || r.status < 200 || r.status == 204 || r.status == 304;
  if (no_body) {
  } else if (!length.empty()) {
    const size_t n = std::stoul(length);
    while (buffer_.size() < pos + n) {
      if (!fill(deadline)) return std::nullopt;
    }
    r.body = buffer_.substr(pos, n);
    pos += n;
  } else if (r.header("Transfer-Encoding") == "chunked") {
    for (;;) {
      size_t line_end;
      while ((line_end = buffer_.find("\r\n", pos)) == std::string::npos) {
        if (!fill(deadline)) return std::nullopt;
      }
      const size_t size = std::stoul(buffer_.substr(pos, line_end - pos), nullptr, 16);
      pos = line_end + 2;
      while (buffer_.size() < pos + size + 2) {
        if (!fill(deadline)) return std::nullopt;
      }
      r.body += buffer_.substr(pos, size);
      pos += size + 2;
      if (size == 0) break;  // no trailers from this server
    }
  } else {
    while (fill(deadline)) {
    }
    if (!eof_) return std::nullopt;
    r.body = buffer_.substr(pos);
    pos = buffer_.size();
  }
  buffer_.erase(0, pos);
  return r;
}

}  // namespace deepinfer::http::testing
