#pragma once
// The threads that run request handlers: a FIFO of tasks and a fixed set of threads. (The
// engine's ThreadPool is a parallel_for pool for kernels; this one runs independent, possibly
// long-blocking tasks.)
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer::http {

class WorkerPool {
 public:
  WorkerPool() = default;
  ~WorkerPool() { stop_and_join(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void start(int threads);
  void post(std::function<void()> task);
  // Runs every task already posted, then joins the threads. Idempotent.
  void stop_and_join();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace deepinfer::http
