#pragma once
// One thread that runs the continuations of generation responses: when a job has news (the
// engine loop calls its listener), the response's pump() is queued here and renders and
// writes what arrived. The engine thread never renders JSON, and no thread waits per stream.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace deepinfer::server {

class Pumped {
 public:
  virtual ~Pumped() = default;
  virtual void pump() = 0;  // runs on the pump thread only, never twice at once

 private:
  friend class ResponsePump;
  std::atomic<bool> queued_{false};
};

class ResponsePump {
 public:
  ResponsePump();
  ~ResponsePump();  // runs what is queued, then stops
  ResponsePump(const ResponsePump&) = delete;
  ResponsePump& operator=(const ResponsePump&) = delete;

  // Queues task->pump() unless it is queued already (news arriving meanwhile is seen by that
  // run: the flag is cleared before pump() starts). Thread-safe, never blocks.
  void post(const std::shared_ptr<Pumped>& task);

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Pumped>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace deepinfer::server
