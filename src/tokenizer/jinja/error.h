#pragma once
// Template errors. Everything that can go wrong surfaces as TemplateError (a deepinfer::Error)
// carrying a kind, the template position and the bare message, so an API layer can return the
// template's own raise_exception text to its client.
#include <string>
#include <utility>

#include "core/error.h"

namespace deepinfer::tokenizer::jinja {

enum class ErrorKind {
  Syntax,       // the template text is malformed
  Unsupported,  // valid jinja2 that this interpreter does not implement
  Runtime,      // jinja2 would raise too (undefined use, type errors, ...)
  Raised,       // the template called raise_exception(message)
  Limit,        // a safety limit (depth, steps, output size) was hit
};

class TemplateError : public Error {
 public:
  TemplateError(ErrorKind kind, std::string message, int line, int column);
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }  // without position
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  ErrorKind kind_;
  std::string message_;
  int line_, column_;
};

// Thrown by helpers that do not know the template position; the interpreter catches it at
// the innermost expression or statement and rethrows a TemplateError with line and column.
struct Failure {
  ErrorKind kind;
  std::string message;
};

// Thrown while constant-folding an output expression (see Interpreter::eval_output) when the
// expression is not constant; the expression is then evaluated normally.
struct Impossible {};

template <typename... Parts>
[[noreturn]] void runtime_fail(Parts&&... parts) {
  throw Failure{ErrorKind::Runtime, str_cat(std::forward<Parts>(parts)...)};
}

template <typename... Parts>
[[noreturn]] void unsupported(Parts&&... parts) {
  throw Failure{ErrorKind::Unsupported, str_cat(std::forward<Parts>(parts)...)};
}

template <typename... Parts>
[[noreturn]] void limit_fail(Parts&&... parts) {
  throw Failure{ErrorKind::Limit, str_cat(std::forward<Parts>(parts)...)};
}

}  // namespace deepinfer::tokenizer::jinja
