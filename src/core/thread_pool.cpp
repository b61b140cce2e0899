#include "core/thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace deepinfer {
namespace {
thread_local bool inside_pool_task = false;

// A model step issues a parallel_for every few tens of microseconds; a futex sleep and
// wake-up between them costs 5-25 us each. Workers and the caller therefore poll for this
// long before they block, so back-to-back calls never sleep and an idle pool still does.
constexpr auto kSpin = std::chrono::microseconds(50);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `ready` for up to kSpin; true as soon as it holds.
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

}  // namespace

int ThreadPool::online_cores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

ThreadPool::ThreadPool(int num_threads, CpuPlacement placement)
    : num_threads_(num_threads > 0 ? num_threads : online_cores()),
      placement_(std::move(placement)) {
  if (placement_.pinned()) pin_current_thread(placement_.of_thread(0));
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_release);
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
  if (placement_.pinned()) pin_current_thread(placement_.of_thread(index));
  uint64_t seen = 0;
  const auto woken = [&] {
    return stopping_.load(std::memory_order_acquire) ||
           generation_.load(std::memory_order_acquire) != seen;
  };
  for (;;) {
    if (!spin_until(woken)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, woken);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
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
    generation_.fetch_add(1, std::memory_order_release);  // publishes the task to spinners
  }
  wake_.notify_all();
  run_task(0);
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
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
