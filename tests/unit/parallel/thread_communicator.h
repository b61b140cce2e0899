#pragma once
// A test-only Communicator whose ranks are threads of one process: each collective publishes
// this rank's buffers in a shared slot, meets the others at a barrier, copies what it needs,
// and meets them again so no buffer is released while read. It lets unit tests run model
// code at world size > 1 (expert parallelism) without MPI.
#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "parallel/communicator.h"

namespace deepinfer::parallel::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world), sync_(world), slots_(world) {}
  int world() const { return world_; }

  // Runs fn(rank) on `world` threads and joins them; rethrows the first failure.
  void run(const std::function<void(int)>& fn) {
    std::vector<std::exception_ptr> errors(static_cast<size_t>(world_));
    std::vector<std::thread> threads;
    for (int r = 0; r < world_; ++r) {
      threads.emplace_back([&, r] {
        try {
          fn(r);
        } catch (...) {
          errors[static_cast<size_t>(r)] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

 private:
  friend class ThreadCommunicator;
  struct Slot {
    const std::byte* data = nullptr;
    std::vector<int64_t> counts;
  };
  // Point-to-point messages, one queue per (source, destination).
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable ready;
    std::map<std::pair<int, int>, std::deque<std::vector<std::byte>>> queues;
  };
  int world_;
  std::barrier<> sync_;
  std::vector<Slot> slots_;
  Mailbox mailbox_;
  std::mutex children_mutex_;
  std::map<std::pair<int64_t, int>, std::shared_ptr<ThreadGroup>> children_;  // by (split, color)
};

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank)
      : owned_(std::move(group)), group_(*owned_), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_.world(); }
  void barrier() override { group_.sync_.arrive_and_wait(); }

  void all_reduce_sum(std::span<float> data) override {
    publish(reinterpret_cast<const std::byte*>(data.data()), {});
    std::vector<float> sum(data.size(), 0.0f);
    for (int r = 0; r < world_size(); ++r) {
      const auto* src = reinterpret_cast<const float*>(slot(r).data);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += src[i];
    }
    barrier();
    std::copy(sum.begin(), sum.end(), data.begin());
  }

  void all_gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv) override {
    publish(send.data(), {});
    for (int r = 0; r < world_size(); ++r) {
      if (!send.empty()) std::memcpy(recv.data() + r * send.size(), slot(r).data, send.size());
    }
    barrier();
  }

  std::vector<int64_t> exchange_counts(std::span<const int64_t> send_bytes) override {
    publish(nullptr, {send_bytes.begin(), send_bytes.end()});
    std::vector<int64_t> recv;
    for (int r = 0; r < world_size(); ++r)
      recv.push_back(slot(r).counts[static_cast<size_t>(rank_)]);
    barrier();
    return recv;
  }

  void all_to_all_v_bytes(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                          std::span<std::byte> recv, std::span<const int64_t> recv_bytes) override {
    publish(send.data(), {send_bytes.begin(), send_bytes.end()});
    int64_t at = 0;
    for (int r = 0; r < world_size(); ++r) {
      const auto& counts = slot(r).counts;
      int64_t offset = 0;
      for (int q = 0; q < rank_; ++q) offset += counts[static_cast<size_t>(q)];
      const int64_t n = counts[static_cast<size_t>(rank_)];
      if (n != recv_bytes[static_cast<size_t>(r)]) fail("all_to_all_v: count mismatch");
      if (n > 0) std::memcpy(recv.data() + at, slot(r).data + offset, static_cast<size_t>(n));
      at += n;
    }
    barrier();
  }

  void broadcast_bytes(std::span<std::byte> data, int root) override {
    publish(data.data(), {});
    if (rank_ != root && !data.empty()) std::memcpy(data.data(), slot(root).data, data.size());
    barrier();
  }

  void send_bytes(std::span<const std::byte> data, int dest) override {
    auto& box = group_.mailbox_;
    {
      std::lock_guard lock(box.mutex);
      box.queues[{rank_, dest}].emplace_back(data.begin(), data.end());
    }
    box.ready.notify_all();
  }

  void recv_bytes(std::span<std::byte> data, int source) override {
    auto& box = group_.mailbox_;
    std::unique_lock lock(box.mutex);
    auto& queue = box.queues[{source, rank_}];
    box.ready.wait(lock, [&] { return !queue.empty(); });
    const std::vector<std::byte> message = std::move(queue.front());
    queue.pop_front();
    if (message.size() != data.size())
      fail("recv: ", message.size(), " bytes, ", data.size(), " expected");
    std::copy(message.begin(), message.end(), data.begin());
  }

  std::shared_ptr<Communicator> split(int color, int key) override {
    const int64_t split = splits_++;
    const int64_t mine[2] = {color, key};
    const std::vector<int64_t> all = all_gather<int64_t>(mine);
    std::vector<std::pair<int64_t, int>> members;  // (key, rank) of my color
    for (int r = 0; r < world_size(); ++r) {
      if (all[static_cast<size_t>(2 * r)] == color)
        members.emplace_back(all[static_cast<size_t>(2 * r + 1)], r);
    }
    std::sort(members.begin(), members.end());
    std::shared_ptr<ThreadGroup> child;
    {
      std::lock_guard lock(group_.children_mutex_);
      auto& slot = group_.children_[{split, color}];
      if (!slot) slot = std::make_shared<ThreadGroup>(static_cast<int>(members.size()));
      child = slot;
    }
    barrier();
    const auto me = std::find_if(members.begin(), members.end(),
                                 [&](const auto& m) { return m.second == rank_; });
    return std::make_shared<ThreadCommunicator>(child, static_cast<int>(me - members.begin()));
  }

 private:
  void publish(const std::byte* data, std::vector<int64_t> counts) {
    auto& mine = group_.slots_[static_cast<size_t>(rank_)];
    mine.data = data;
    mine.counts = std::move(counts);
    barrier();
  }
  const ThreadGroup::Slot& slot(int r) const { return group_.slots_[static_cast<size_t>(r)]; }

  std::shared_ptr<ThreadGroup> owned_;  // a group made by split
  ThreadGroup& group_;
  int rank_;
  int64_t splits_ = 0;
};

}  // namespace deepinfer::parallel::testing
