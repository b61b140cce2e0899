#include "parallel/communicator.h"

namespace deepinfer::parallel {

void SingleProcessCommunicator::all_gather_bytes(std::span<const std::byte> send,
                                                 std::span<std::byte> recv) {
  DI_CHECK(recv.size() == send.size(), "all_gather: receive buffer of ", recv.size(), " bytes for ",
           send.size(), " bytes from 1 rank");
  if (!send.empty()) std::memcpy(recv.data(), send.data(), send.size());
}

std::vector<int64_t> SingleProcessCommunicator::exchange_counts(
    std::span<const int64_t> send_bytes) {
  DI_CHECK(send_bytes.size() == 1, "exchange_counts: ", send_bytes.size(),
           " counts for a world of 1 rank");
  return {send_bytes[0]};
}

void SingleProcessCommunicator::all_to_all_v_bytes(std::span<const std::byte> send,
                                                   std::span<const int64_t> send_bytes,
                                                   std::span<std::byte> recv,
                                                   std::span<const int64_t> recv_bytes) {
  DI_CHECK(send_bytes.size() == 1 && recv_bytes.size() == 1 && send_bytes[0] == recv_bytes[0] &&
               static_cast<int64_t>(send.size()) == send_bytes[0] &&
               static_cast<int64_t>(recv.size()) == recv_bytes[0],
           "all_to_all_v: inconsistent buffer sizes for a world of 1 rank (send ", send.size(),
           " bytes, receive ", recv.size(), " bytes)");
  if (!send.empty()) std::memcpy(recv.data(), send.data(), send.size());
}

void SingleProcessCommunicator::broadcast_bytes(std::span<std::byte>, int root) {
  DI_CHECK(root == 0, "broadcast: root rank ", root, " in a world of 1 rank");
}

void SingleProcessCommunicator::send_bytes(std::span<const std::byte>, int dest) {
  fail("send to rank ", dest, " in a world of 1 rank");
}

void SingleProcessCommunicator::recv_bytes(std::span<std::byte>, int source) {
  fail("receive from rank ", source, " in a world of 1 rank");
}

std::shared_ptr<Communicator> SingleProcessCommunicator::split(int, int) {
  return std::make_shared<SingleProcessCommunicator>();
}

}  // namespace deepinfer::parallel
