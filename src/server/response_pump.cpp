#include "server/response_pump.h"

#include "core/log.h"

namespace deepinfer::server {

ResponsePump::ResponsePump() : thread_([this] { run(); }) {}

ResponsePump::~ResponsePump() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ResponsePump::post(const std::shared_ptr<Pumped>& task) {
  if (task->queued_.exchange(true)) return;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(task);
  }
  wake_.notify_one();
}

void ResponsePump::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    auto task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task->queued_.store(false);
    try {
      task->pump();
    } catch (const std::exception& e) {
      log::error("response pump: ", e.what());
    }
    task.reset();
    lock.lock();
  }
}

}  // namespace deepinfer::server
