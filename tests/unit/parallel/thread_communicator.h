#pragma once
// A test-only Communicator whose ranks are threads of one process: each collective publishes
// this rank's buffers in a shared slot, meets the others at a barrier, copies what it needs,
// and meets them again so no buffer is released while read. It lets unit tests run model
// code at world size > 1 (expert parallelism) without MPI.
#include <barrier>
#include <cstring>
#include <functional>
#include <thread>
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
  int world_;
  std::barrier<> sync_;
  std::vector<Slot> slots_;
};

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
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

 private:
  void publish(const std::byte* data, std::vector<int64_t> counts) {
    auto& mine = group_.slots_[static_cast<size_t>(rank_)];
    mine.data = data;
    mine.counts = std::move(counts);
    barrier();
  }
  const ThreadGroup::Slot& slot(int r) const { return group_.slots_[static_cast<size_t>(r)]; }

  ThreadGroup& group_;
  int rank_;
};

}  // namespace deepinfer::parallel::testing
