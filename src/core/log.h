#pragma once
// Levelled logging to stderr. The level comes from DEEPINFER_LOG_LEVEL
// (debug|info|warn|error|off) unless set explicitly, e.g. by --log-level.
#include <string_view>

#include "core/error.h"

namespace deepinfer::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

Level level();
void set_level(Level level);
Level parse_level(std::string_view name);  // throws Error on unknown names
void write(Level level, std::string_view message);

template <typename... Parts>
void debug(Parts&&... parts) {
  if (level() <= Level::debug) write(Level::debug, str_cat(std::forward<Parts>(parts)...));
}
template <typename... Parts>
void info(Parts&&... parts) {
  if (level() <= Level::info) write(Level::info, str_cat(std::forward<Parts>(parts)...));
}
template <typename... Parts>
void warn(Parts&&... parts) {
  if (level() <= Level::warn) write(Level::warn, str_cat(std::forward<Parts>(parts)...));
}
template <typename... Parts>
void error(Parts&&... parts) {
  if (level() <= Level::error) write(Level::error, str_cat(std::forward<Parts>(parts)...));
}

}  // namespace deepinfer::log
