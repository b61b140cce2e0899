#pragma once
// The project's one error type: a message a user can act on (what, where, what to do).
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace deepinfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates any streamable values into one string: str_cat("layer ", 3, ": bad shape").
template <typename... Parts>
std::string str_cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(str_cat(std::forward<Parts>(parts)...));
}

}  // namespace deepinfer

// Throws deepinfer::Error with the streamed message when the condition is false.
#define DI_CHECK(cond, ...)                      \
  do {                                           \
    if (!(cond)) ::deepinfer::fail(__VA_ARGS__); \
  } while (0)
