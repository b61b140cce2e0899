#pragma once
// Collective communication between the ranks of one model replica (expert / tensor
// parallelism). Model code talks only to this interface: single-process runs use
// SingleProcessCommunicator (world size 1, every collective is a copy); MpiCommunicator
// (mpi_communicator.h) slots in behind the same calls without touching model code.
//
// All collectives are blocking and must be called by every rank in the same order.
// Payloads are trivially copyable elements; the typed helpers below convert counts of
// elements into the byte counts the virtual (transport) functions take.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace deepinfer::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  virtual void barrier() = 0;
  // Element-wise sum over ranks, in place; every rank ends with the same values. The
  // summation order is fixed (rank 0 first), so results do not depend on timing.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // recv = concatenation over ranks (rank order) of each rank's `send`; every rank sends
  // the same number of bytes; recv.size() == world_size() * send.size().
  virtual void all_gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv) = 0;
  // Each rank tells every rank how many bytes it will send it: send_bytes[r] goes to rank r;
  // returns recv_bytes[r], what rank r sends here.
  virtual std::vector<int64_t> exchange_counts(std::span<const int64_t> send_bytes) = 0;
  // `send` holds world_size() consecutive blocks, block r (send_bytes[r] bytes) for rank r;
  // `recv` receives the blocks sent here, in source-rank order (sizes from exchange_counts).
  virtual void all_to_all_v_bytes(std::span<const std::byte> send,
                                  std::span<const int64_t> send_bytes, std::span<std::byte> recv,
                                  std::span<const int64_t> recv_bytes) = 0;
  // `data` (the same size on every rank) takes root's bytes on every rank.
  virtual void broadcast_bytes(std::span<std::byte> data, int root) = 0;
  // The same, for a rank that may wait long (a lockstep worker between steps): a transport
  // may let it sleep instead of spin. Every rank of one broadcast calls the same variant.
  virtual void broadcast_bytes_idle(std::span<std::byte> data, int root) {
    broadcast_bytes(data, root);
  }
  // Point to point (pipeline stages): `data` goes to rank `dest`, which receives exactly
  // data.size() bytes from `source` with recv_bytes. Blocking; messages between one pair of
  // ranks arrive in the order they were sent.
  virtual void send_bytes(std::span<const std::byte> data, int dest) = 0;
  virtual void recv_bytes(std::span<std::byte> data, int source) = 0;
  // The ranks giving the same `color` form one group, ordered by `key` (MPI_Comm_split).
  // Collective over this communicator; the group has its own message space.
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;

  template <typename T>
  void send(std::span<const T> data, int dest) {
    static_assert(std::is_trivially_copyable_v<T>, "send moves raw bytes");
    send_bytes(std::as_bytes(data), dest);
  }
  template <typename T>
  void recv(std::span<T> data, int source) {
    static_assert(std::is_trivially_copyable_v<T>, "recv moves raw bytes");
    recv_bytes(std::as_writable_bytes(data), source);
  }

  // Typed all-to-all: send_counts[r] elements of `send` (in rank order) go to rank r; on
  // return `recv` holds what every rank sent here, in source-rank order, and
  // recv_counts[r] says how many elements came from rank r.
  template <typename T>
  void all_to_all_v(std::span<const T> send, std::span<const int64_t> send_counts,
                    std::vector<T>& recv, std::vector<int64_t>& recv_counts) {
    static_assert(std::is_trivially_copyable_v<T>, "all_to_all_v moves raw bytes");
    check_counts(send_counts, static_cast<int64_t>(send.size()));
    std::vector<int64_t> send_bytes(send_counts.begin(), send_counts.end());
    for (auto& b : send_bytes) b *= static_cast<int64_t>(sizeof(T));
    std::vector<int64_t> recv_bytes = exchange_counts(send_bytes);
    recv_counts.assign(recv_bytes.size(), 0);
    int64_t total = 0;
    for (size_t r = 0; r < recv_bytes.size(); ++r) {
      DI_CHECK(recv_bytes[r] % static_cast<int64_t>(sizeof(T)) == 0, "all_to_all_v: rank ", r,
               " sent ", recv_bytes[r], " bytes, not a whole number of ", sizeof(T),
               "-byte elements (ranks disagree on the element type)");
      recv_counts[r] = recv_bytes[r] / static_cast<int64_t>(sizeof(T));
      total += recv_counts[r];
    }
    recv.resize(static_cast<size_t>(total));
    all_to_all_v_bytes(std::as_bytes(send), send_bytes, std::as_writable_bytes(std::span<T>(recv)),
                       recv_bytes);
  }

  // Typed all-gather: every rank contributes send.size() elements.
  template <typename T>
  std::vector<T> all_gather(std::span<const T> send) {
    static_assert(std::is_trivially_copyable_v<T>, "all_gather moves raw bytes");
    std::vector<T> recv(send.size() * static_cast<size_t>(world_size()));
    all_gather_bytes(std::as_bytes(send), std::as_writable_bytes(std::span<T>(recv)));
    return recv;
  }

 protected:
  void check_counts(std::span<const int64_t> counts, int64_t available) const {
    DI_CHECK(static_cast<int64_t>(counts.size()) == world_size(), "all_to_all_v: ", counts.size(),
             " send counts for a world of ", world_size(), " ranks");
    int64_t total = 0;
    for (int64_t c : counts) {
      DI_CHECK(c >= 0, "all_to_all_v: negative send count ", c);
      total += c;
    }
    DI_CHECK(total == available, "all_to_all_v: send counts add up to ", total,
             " elements but the send buffer holds ", available);
  }
};

// World size 1: rank 0 talks only to itself, so every collective is a copy (or nothing).
class SingleProcessCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void barrier() override {}
  void all_reduce_sum(std::span<float>) override {}
  void all_gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv) override;
  std::vector<int64_t> exchange_counts(std::span<const int64_t> send_bytes) override;
  void all_to_all_v_bytes(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                          std::span<std::byte> recv, std::span<const int64_t> recv_bytes) override;
  void broadcast_bytes(std::span<std::byte> data, int root) override;
  // A rank has no one else to talk to: sending to itself is a programming error.
  void send_bytes(std::span<const std::byte> data, int dest) override;
  void recv_bytes(std::span<std::byte> data, int source) override;
  std::shared_ptr<Communicator> split(int color, int key) override;
};

}  // namespace deepinfer::parallel
