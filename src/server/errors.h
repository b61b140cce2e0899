#pragma once
// Errors as the OpenAI API reports them: an HTTP status and
// {"error": {"message", "type", "param", "code"}}.
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace deepinfer::server {

class ApiError : public Error {
 public:
  // `param`: the request field at fault ("" -> null); `code`: OpenAI's machine-readable code
  // ("" -> null); type: "invalid_request_error" for 4xx, "server_error" for 5xx, unless given.
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "");

  int status() const { return status_; }
  // The whole message (what() stops at the first NUL a quoted request value may hold).
  const std::string& message() const { return message_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  const std::string& type() const { return type_; }
  nlohmann::ordered_json to_json() const;

 private:
  int status_;
  std::string message_;
  std::string param_;
  std::string code_;
  std::string type_;
};

// 400 naming the parameter at fault.
[[noreturn]] void bad_param(const std::string& param, const std::string& message);

// The body of an error response, for errors raised outside ApiError.
std::string error_body(int status, const std::string& message, const std::string& param = "",
                       const std::string& code = "");

}  // namespace deepinfer::server
