#include "server/errors.h"

#include <utility>

namespace deepinfer::server {

ApiError::ApiError(int status, std::string message, std::string param, std::string code,
                   std::string type)
    : Error(message),
      status_(status),
      message_(std::move(message)),
      param_(std::move(param)),
      code_(std::move(code)),
      type_(std::move(type)) {
  if (type_.empty()) type_ = status_ >= 500 ? "server_error" : "invalid_request_error";
}

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json error;
  error["message"] = message_;
  error["type"] = type_;
  error["param"] = param_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param_);
  error["code"] = code_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code_);
  nlohmann::ordered_json out;
  out["error"] = std::move(error);
  return out;
}

void bad_param(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

std::string error_body(int status, const std::string& message, const std::string& param,
                       const std::string& code) {
  // Messages may quote request bytes: never let invalid UTF-8 break the error itself.
  return ApiError(status, message, param, code)
      .to_json()
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace deepinfer::server
