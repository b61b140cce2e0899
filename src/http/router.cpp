#include "http/router.h"

#include <algorithm>

namespace deepinfer::http {

void Router::add(std::string method, std::string path, Handler handler) {
  routes_.push_back({std::move(method), std::move(path), false, std::move(handler)});
}

void Router::add_prefix(std::string method, std::string prefix, Handler handler) {
  routes_.push_back({std::move(method), std::move(prefix), true, std::move(handler)});
}

Router::Match Router::match(const std::string& method, const std::string& path) const {
  // The routes that own this path: its exact routes if it has any, else the longest prefix's.
  std::vector<const Route*> owners;
  for (const Route& r : routes_) {
    if (!r.prefix && r.path == path) owners.push_back(&r);
  }
  if (owners.empty()) {
    size_t longest = 0;
    bool found = false;
    for (const Route& r : routes_) {
      if (!r.prefix || path.compare(0, r.path.size(), r.path) != 0) continue;
      if (!found || r.path.size() > longest) {
        longest = r.path.size();
        owners.clear();
        found = true;
      }
      if (r.path.size() == longest) owners.push_back(&r);
    }
  }
  Match m;
  if (owners.empty()) {
    m.status = 404;
    return m;
  }
  for (const Route* r : owners) {
    if (r->method == method) {
      m.handler = &r->handler;
      return m;
    }
  }
  if (method == "HEAD") {
    for (const Route* r : owners) {
      if (r->method == "GET") {
        m.handler = &r->handler;
        return m;
      }
    }
  }
  std::vector<std::string> allowed;
  auto allow = [&allowed](const std::string& name) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) allowed.push_back(name);
  };
  for (const Route* r : owners) {
    allow(r->method);
    if (r->method == "GET") allow("HEAD");
  }
  m.status = 405;
  for (const std::string& name : allowed) {
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += name;
  }
  return m;
}

}  // namespace deepinfer::http
