#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace deepinfer::log {
namespace {

Level initial_level() {
  const char* env = std::getenv("DEEPINFER_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return Level::info;
  try {
    return parse_level(env);
  } catch (const Error&) {
    return Level::info;
  }
}

std::atomic<Level>& current() {
  static std::atomic<Level> value{initial_level()};
  return value;
}

const char* tag(Level level) {
  switch (level) {
    case Level::debug:
      return "debug";
    case Level::info:
      return "info";
    case Level::warn:
      return "warn";
    case Level::error:
      return "error";
    case Level::off:
      break;
  }
  return "";
}

}  // namespace

Level level() {
  return current().load(std::memory_order_relaxed);
}
void set_level(Level value) {
  current().store(value, std::memory_order_relaxed);
}

Level parse_level(std::string_view name) {
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn" || name == "warning") return Level::warn;
  if (name == "error") return Level::error;
  if (name == "off") return Level::off;
  fail("unknown log level '", name, "' (expected debug, info, warn, error or off)");
}

void write(Level level, std::string_view message) {
  static std::mutex mutex;
  // Local wall-clock time to the millisecond, as people read it ("2026-12-01 08:36:45.123").
  using clock = std::chrono::system_clock;
  const auto now = clock::now();
  const std::time_t seconds = clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "%s.%03lld [%s] %.*s\n", stamp, static_cast<long long>(ms), tag(level),
               static_cast<int>(message.size()), message.data());
}

}  // namespace deepinfer::log
