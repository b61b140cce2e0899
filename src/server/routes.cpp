// ApiServer's routes and the checks in front of them: Host allow-list, CORS, API key,
// readiness, method (405 with Allow), JSON content type.
#include <ctime>

#include "core/log.h"
#include "server/request_guard.h"
#include "server/responses.h"
#include "server/server_impl.h"

namespace deepinfer::server {

namespace {

Json model_card(const ModelInfo& info, int64_t created) {
  Json card;
  card["id"] = info.name;
  card["object"] = "model";
  card["created"] = created;
  card["owned_by"] = "deepinfer";
  card["root"] = info.root;
  card["parent"] = nullptr;
  card["max_model_len"] = info.max_model_len;
  return card;
}

// An exchange that adds fixed headers (CORS) to the response it forwards.
class WithHeaders : public http::Exchange {
 public:
  WithHeaders(std::shared_ptr<http::Exchange> inner, std::vector<http::Header> headers)
      : inner_(std::move(inner)), headers_(std::move(headers)) {}
  void respond(http::Response response) override { inner_->respond(add(std::move(response))); }
  void start_stream(http::Response head) override { inner_->start_stream(add(std::move(head))); }
  bool write_chunk(std::string data) override { return inner_->write_chunk(std::move(data)); }
  void end_stream() override { inner_->end_stream(); }
  bool closed() const override { return inner_->closed(); }
  void on_close(std::function<void()> callback) override { inner_->on_close(std::move(callback)); }
  size_t queued_bytes() const override { return inner_->queued_bytes(); }

 private:
  http::Response add(http::Response r) const {
    for (const auto& h : headers_) r.set_header(h.name, h.value);
    return r;
  }
  std::shared_ptr<http::Exchange> inner_;
  std::vector<http::Header> headers_;
};

http::Response json_response(int status, std::string body) {
  http::Response res;
  res.status = status;
  res.set_header("Content-Type", "application/json");
  res.body = std::move(body);
  return res;
}

}  // namespace

void Reply::send(http::Response response) const {
  exchange->respond(std::move(response));
}

void Reply::send_json(int status, const std::string& body) const {
  send(json_response(status, body));
}

void Reply::send_error(const ApiError& error) const {
  http::Response res = json_response(error.status(), dump_json(error.to_json()));
  if (error.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
  if (error.status() == 503) res.set_header("Retry-After", "1");
  send(std::move(res));
}

void Reply::start_stream(http::Response head) const {
  exchange->start_stream(std::move(head));
}

void ApiServer::Impl::handle(http::Request&& req, std::shared_ptr<http::Exchange> exchange) {
  if (const auto error = check_host(req, allowed_hosts)) {
    Reply{exchange}.send_error(*error);
    return;
  }
  if (is_preflight(req)) {
    exchange->respond(preflight_response(req, options));
    return;
  }
  if (auto cors = cors_headers(req, options); !cors.empty()) {
    exchange = std::make_shared<WithHeaders>(std::move(exchange), std::move(cors));
  }
  const Reply reply{exchange};
  const bool api = req.path.rfind("/v1/", 0) == 0;
  if (api) {
    if (const auto error = check_api_key(req, options.api_key)) {
      reply.send_error(*error);
      return;
    }
  }
  const auto match = router.match(req.method, req.path);
  if (match.handler == nullptr) {
    if (match.status == 405) {
      http::Response res =
          json_response(405, error_body(405, str_cat("method ", req.method, " is not allowed on ",
                                                     req.path, " (allowed: ", match.allow, ")")));
      res.set_header("Allow", match.allow);
      reply.send(std::move(res));
    } else {
      reply.send_error(ApiError(404, str_cat("Invalid URL (", req.method, " ", req.path, ")")));
    }
    return;
  }
  const ServerState s = state.load();
  if (api && s != ServerState::ready) {
    reply.send_error(ApiError(503, unavailable_message(s)));
    return;
  }
  if (req.method == "POST") {
    if (const auto error = check_json_content_type(req)) {
      reply.send_error(*error);
      return;
    }
  }
  const std::string route = str_cat(req.method, " ", req.path);
  try {
    (*match.handler)(std::move(req), exchange);
  } catch (const ApiError& e) {
    reply.send_error(e);
  } catch (const std::exception& e) {
    log::error("internal error on ", route, ": ", e.what());
    reply.send_error(ApiError(500, str_cat("internal server error: ", e.what())));
  }
}

std::string ApiServer::Impl::unavailable_message(ServerState state) {
  if (state == ServerState::failed) {
    std::lock_guard lock(failure_mutex);
    return str_cat("engine unavailable: ", failure);
  }
  return state == ServerState::draining ? "the server is shutting down"
                                        : "the model is still loading; retry when /health is 200";
}

void ApiServer::Impl::install_routes() {
  router.add("GET", "/health", [this](http::Request&&, std::shared_ptr<http::Exchange> ex) {
    const ServerState s = state.load();
    if (s == ServerState::ready) {
      ex->respond(http::Response{});
      return;
    }
    Reply{ex}.send_error(ApiError(503, unavailable_message(s)));
  });
  router.add("GET", "/version", [](http::Request&&, std::shared_ptr<http::Exchange> ex) {
    Reply{ex}.send_json(200, dump_json(Json{{"version", DEEPINFER_VERSION}}));
  });
  router.add("GET", "/metrics", [this](http::Request&&, std::shared_ptr<http::Exchange> ex) {
    http::Response res;
    if (state.load() != ServerState::starting) res.body = shared->metrics.render(client->stats());
    res.set_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    ex->respond(std::move(res));
  });
  const auto created = static_cast<int64_t>(std::time(nullptr));
  router.add("GET", "/v1/models",
             [this, created](http::Request&&, std::shared_ptr<http::Exchange> ex) {
               Json out;
               out["object"] = "list";
               out["data"] = Json::array({model_card(info, created)});
               Reply{ex}.send_json(200, dump_json(out));
             });
  router.add_prefix("GET", "/v1/models/",
                    [this, created](http::Request&& req, std::shared_ptr<http::Exchange> ex) {
                      const std::string id = req.path.substr(std::string("/v1/models/").size());
                      if (id != info.name) {
                        throw ApiError(404, str_cat("The model `", id, "` does not exist."),
                                       "model", "model_not_found");
                      }
                      Reply{ex}.send_json(200, dump_json(model_card(info, created)));
                    });
  for (const auto& [path, api] : {std::pair{"/v1/completions", Api::completions},
                                  std::pair{"/v1/chat/completions", Api::chat}}) {
    router.add("POST", path,
               [this, api = api](http::Request&& req, std::shared_ptr<http::Exchange> ex) {
                 handle_generation(api, std::move(req), Reply{std::move(ex)});
               });
  }
}

}  // namespace deepinfer::server
