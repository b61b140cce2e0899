#include "http/client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace deepinfer::http {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Contains `token` as one element of a comma-separated header value ("gzip, chunked").
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

std::string shown(std::string_view bytes) {
  std::string out;
  for (char c : bytes.substr(0, 80)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : str_cat("\\x", std::hex, int(u));
  }
  return out;
}

timeval to_timeval(double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - std::floor(seconds)) * 1e6);
  return tv;
}

}  // namespace

Url parse_url(std::string_view url) {
  const std::string given(url);
  constexpr std::string_view kScheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    fail("--base-url ", given, ": https is not supported (no TLS in this client); use http://");
  }
  DI_CHECK(url.rfind(kScheme, 0) == 0, "--base-url ", given,
           ": expected http://HOST[:PORT][/PATH]");
  url.remove_prefix(kScheme.size());
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  Url out;
  if (slash != std::string_view::npos) {
    out.base_path = std::string(url.substr(slash));
    while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  }
  std::string_view host = authority;
  if (const size_t colon = authority.rfind(':');
      colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
    host = authority.substr(0, colon);
    const std::string port(authority.substr(colon + 1));
    char* end = nullptr;
    const long value = std::strtol(port.c_str(), &end, 10);
    DI_CHECK(!port.empty() && *end == '\0' && value > 0 && value < 65536, "--base-url ", given,
             ": bad port '", port, "'");
    out.port = static_cast<int>(value);
  }
  DI_CHECK(!host.empty(), "--base-url ", given, ": no host");
  out.host = std::string(host);
  return out;
}

std::string format_request(std::string_view method, std::string_view path, const Url& url,
                           std::string_view body, const HeaderList& headers) {
  std::string out = str_cat(method, " ", url.base_path, path, " HTTP/1.1\r\nHost: ", url.host, ":",
                            url.port, "\r\n");
  bool has_type = false;
  for (const auto& [name, value] : headers) {
    has_type = has_type || iequals(name, "Content-Type");
    out += str_cat(name, ": ", value, "\r\n");
  }
  if (!body.empty() && !has_type) out += "Content-Type: application/json\r\n";
  if (!body.empty() || method == "POST") out += str_cat("Content-Length: ", body.size(), "\r\n");
  out += "\r\n";
  out += body;
  return out;
}

const std::string* ResponseHead::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return &value;
  }
  return nullptr;
}

std::optional<ResponseHead> parse_response_head(std::string_view bytes, size_t& consumed) {
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) return std::nullopt;
  consumed = end + 4;
  std::string_view rest = bytes.substr(0, end + 2);
  const auto next_line = [&] {
    const size_t eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    return line;
  };
  const std::string_view status_line = next_line();
  // "HTTP/1.1 200 OK": the reason phrase may be empty.
  DI_CHECK(status_line.size() >= 12 && status_line.rfind("HTTP/1.", 0) == 0 &&
               status_line[8] == ' ' && std::isdigit(static_cast<unsigned char>(status_line[9])) &&
               std::isdigit(static_cast<unsigned char>(status_line[10])) &&
               std::isdigit(static_cast<unsigned char>(status_line[11])) &&
               (status_line.size() == 12 || status_line[12] == ' '),
           "malformed HTTP status line '", shown(status_line), "'");
  ResponseHead head;
  head.status =
      (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
  if (status_line.size() > 13) head.reason = std::string(status_line.substr(13));
  while (!rest.empty()) {
    const std::string_view line = next_line();
    const size_t colon = line.find(':');
    DI_CHECK(colon != std::string_view::npos && colon > 0, "malformed HTTP header line '",
             shown(line), "'");
    head.headers.emplace_back(std::string(line.substr(0, colon)),
                              std::string(trim(line.substr(colon + 1))));
  }
  return head;
}

size_t ChunkedDecoder::feed(std::string_view input, std::string& out) {
  size_t used = 0;
  // A line ends in CRLF; a bare LF is accepted too (lenient, as most clients are).
  const auto take_line = [&](std::string& line) {
    while (used < input.size()) {
      const char c = input[used++];
      if (c == '\n') {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
      line += c;
      DI_CHECK(line.size() <= 4096, "chunked body: a size or trailer line over 4096 bytes");
    }
    return false;
  };
  while (used < input.size() && state_ != State::done) {
    switch (state_) {
      case State::size_line: {
        if (!take_line(line_)) break;
        std::string_view size = trim(std::string_view(line_).substr(0, line_.find(';')));
        DI_CHECK(
            !size.empty() && size.size() <= 15 &&
                std::all_of(size.begin(), size.end(),
                            [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }),
            "chunked body: bad chunk size line '", shown(line_), "'");
        remaining_ = std::stoull(std::string(size), nullptr, 16);
        line_.clear();
        state_ = remaining_ == 0 ? State::trailers : State::data;
        break;
      }
      case State::data: {
        const size_t n = static_cast<size_t>(
            std::min<uint64_t>(remaining_, static_cast<uint64_t>(input.size() - used)));
        out.append(input.substr(used, n));
        used += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::data_crlf;
        break;
      }
      case State::data_crlf:
        if (!take_line(line_)) break;
        DI_CHECK(line_.empty(), "chunked body: chunk data not followed by CRLF (got '",
                 shown(line_), "')");
        state_ = State::size_line;
        break;
      case State::trailers:
        if (!take_line(line_)) break;
        if (line_.empty()) state_ = State::done;
        line_.clear();
        break;
      case State::done:
        break;
    }
  }
  return used;
}

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the LF of a CRLF: the line already ended at CR
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      line(pending_, out);
      pending_.clear();
    } else {
      pending_ += c;
    }
  }
  return out;
}

void SseParser::line(std::string_view text, std::vector<SseEvent>& out) {
  if (text.empty()) {
    if (has_data_) out.push_back(std::move(current_));
    current_ = {};
    has_data_ = false;
    return;
  }
  if (text.front() == ':') return;
  const size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = text.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) current_.data += '\n';
    current_.data += value;
    has_data_ = true;
  } else if (field == "event") {
    current_.event = std::string(value);
  }  // id and retry do not matter to a client that never reconnects
}

Connection Connection::open(const std::string& host, int port, double timeout_s) {
  const std::string peer = str_cat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found)) {
    fail("connect to ", peer, ": ", gai_strerror(rc));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (rc == 0) {
        why = str_cat("timed out after ", timeout_s, " s");
        rc = -1;
      } else if (rc > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        if (err) why = std::strerror(err);
      } else {
        why = std::strerror(errno);
      }
    } else if (rc != 0) {
      why = std::strerror(errno);
    }
    if (rc == 0) {
      freeaddrinfo(found);
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Connection conn(fd, peer);
      conn.set_timeout(timeout_s);
      return conn;
    }
    close(fd);
  }
  freeaddrinfo(found);
  fail("connect to ", peer, ": ", why);
}

Connection::Connection(Connection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), peer_(std::move(other.peer_)) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    peer_ = std::move(other.peer_);
  }
  return *this;
}

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

void Connection::set_timeout(double seconds) {
  const timeval tv = to_timeval(seconds);
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void Connection::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fail("send to ", peer_, ": ",
           errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

size_t Connection::receive(char* data, size_t size) {
  while (true) {
    const ssize_t n = ::recv(fd_, data, size, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    fail("receive from ", peer_, ": ",
         errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : std::strerror(errno));
  }
}

ResponseReader::ResponseReader(Connection& connection) : connection_(connection) {
  size_t consumed = 0;
  std::optional<ResponseHead> head;
  while (!(head = parse_response_head(buffer_, consumed))) {
    DI_CHECK(buffer_.size() <= 1 << 20, "HTTP response head over 1 MiB");
    DI_CHECK(fill(), buffer_.empty() ? "the server closed the connection without a response"
                                     : "the server closed the connection inside the response head");
  }
  head_ = std::move(*head);
  buffer_.erase(0, consumed);
  const std::string* encoding = head_.header("Transfer-Encoding");
  const std::string* length = head_.header("Content-Length");
  if (encoding && has_token(*encoding, "chunked")) {
    framing_ = Framing::chunked;
  } else if (length) {
    framing_ = Framing::length;
    DI_CHECK(!length->empty() && std::all_of(length->begin(), length->end(),
                                             [](char c) { return c >= '0' && c <= '9'; }),
             "bad Content-Length '", shown(*length), "'");
    remaining_ = std::stoull(*length);
  }
  if (head_.status == 204 || head_.status == 304 || head_.status / 100 == 1) {
    framing_ = Framing::length;
    remaining_ = 0;
  }
  finished_ = framing_ == Framing::length && remaining_ == 0;
}

bool ResponseReader::fill() {
  char chunk[16384];
  const size_t n = connection_.receive(chunk, sizeof(chunk));
  buffer_.append(chunk, n);
  return n > 0;
}

bool ResponseReader::read_some(std::string& out) {
  out.clear();
  while (!finished_ && out.empty()) {
    if (buffer_.empty() && !fill()) {
      DI_CHECK(framing_ == Framing::until_close, "the server closed the connection before the ",
               framing_ == Framing::chunked ? "last chunk" : "end of the Content-Length body");
      finished_ = true;
      break;
    }
    switch (framing_) {
      case Framing::length: {
        const size_t n = static_cast<size_t>(
            std::min<uint64_t>(remaining_, static_cast<uint64_t>(buffer_.size())));
        out.assign(buffer_, 0, n);
        buffer_.erase(0, n);
        remaining_ -= n;
        finished_ = remaining_ == 0;
        break;
      }
      case Framing::chunked:
        buffer_.erase(0, chunked_.feed(buffer_, out));
        finished_ = chunked_.done();
        break;
      case Framing::until_close:
        out.swap(buffer_);
        break;
    }
  }
  return !out.empty();
}

std::string ResponseReader::read_all() {
  std::string body, piece;
  while (read_some(piece)) body += piece;
  return body;
}

FetchResult fetch(const Url& url, std::string_view method, std::string_view path,
                  std::string_view body, double timeout_s) {
  Connection conn = Connection::open(url.host, url.port, timeout_s);
  conn.send(format_request(method, path, url, body, {{"Connection", "close"}}));
  ResponseReader reader(conn);
  FetchResult out;
  out.body = reader.read_all();
  out.head = reader.head();
  return out;
}

}  // namespace deepinfer::http
