#pragma once
// Method + path -> handler, with the answers a router owes: an unknown path is 404, a known
// path asked with another method is 405 with an Allow header. HEAD matches a GET route (the
// server sends no body for HEAD); OPTIONS is left to the caller (CORS preflight).
#include <string>
#include <vector>

#include "http/http_server.h"

namespace deepinfer::http {

class Router {
 public:
  void add(std::string method, std::string path, Handler handler);  // the exact path
  // Every path that starts with `prefix` (the longest matching prefix wins over shorter ones;
  // an exact route wins over any prefix).
  void add_prefix(std::string method, std::string prefix, Handler handler);

  struct Match {
    const Handler* handler = nullptr;  // null: status says why
    int status = 200;                  // 200, 404 or 405
    std::string allow;                 // 405: the methods the path takes, e.g. "GET, HEAD"
  };
  Match match(const std::string& method, const std::string& path) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    bool prefix = false;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace deepinfer::http
