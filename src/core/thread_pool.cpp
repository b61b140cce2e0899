#include "core/thread_pool.h"

#include <unistd.h>

#include <algorithm>

namespace deepinfer {
namespace {
thread_local bool inside_pool_task = false;
}

int ThreadPool::online_cores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : online_cores()) {
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_task(int index) {
  if (index >= task_chunks_) return;
  const int64_t chunk = (task_n_ + task_chunks_ - 1) / task_chunks_;
  const int64_t begin = std::min<int64_t>(task_n_, chunk * index);
  const int64_t end = std::min<int64_t>(task_n_, begin + chunk);
  if (begin >= end) return;
  try {
    inside_pool_task = true;
    (*task_)(begin, end);
    inside_pool_task = false;
  } catch (...) {
    inside_pool_task = false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_task(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t max_chunks = (n + min_chunk - 1) / min_chunk;
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads_, max_chunks));
  if (chunks <= 1 || inside_pool_task) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    task_n_ = n;
    task_chunks_ = chunks;
    error_ = nullptr;
    pending_.store(num_threads_ - 1, std::memory_order_release);
    ++generation_;
  }
  wake_.notify_all();
  run_task(0);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    task_ = nullptr;
    if (error_) {
      auto error = error_;
      error_ = nullptr;
      std::rethrow_exception(error);
    }
  }
}

}  // namespace deepinfer
