#pragma once
// A fixed pool of worker threads for data-parallel loops. The calling thread takes part
// as worker 0. Work is split into contiguous, deterministic chunks; kernels never split
// a reduction across threads, so results do not depend on the thread count.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cpu_placement.h"

namespace deepinfer {

class ThreadPool {
 public:
  // num_threads <= 0 means one per online core. A pinned `placement` (core/cpu_placement.h)
  // restricts thread i (0: the constructing thread, which takes part as worker 0) to
  // placement.of_thread(i).
  explicit ThreadPool(int num_threads = 0, CpuPlacement placement = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), at most one chunk per thread,
  // each at least `min_chunk` long (except the last). Blocks until all are done and
  // rethrows the first exception. Nested calls from inside a task run inline.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

  static int online_cores();

 private:
  void worker_loop(int index);
  void run_task(int index);

  int num_threads_;
  CpuPlacement placement_;
  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one parallel_for at a time from outside the pool
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* task_ = nullptr;
  int64_t task_n_ = 0;
  int task_chunks_ = 0;
  // Written under mutex_; atomic so that spinning threads can watch them without it.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::exception_ptr error_;
  std::atomic<bool> stopping_{false};
};

}  // namespace deepinfer
