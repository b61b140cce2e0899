#include "parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/error.h"

namespace deepinfer::parallel {
namespace {

int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return end != nullptr && *end == '\0' && parsed >= 0 ? static_cast<int>(parsed) : -1;
}

int to_int(int64_t bytes, const char* what) {
  DI_CHECK(bytes >= 0 && bytes <= INT32_MAX, "MPI ", what, ": message of ", bytes,
           " bytes does not fit one MPI call");
  return static_cast<int>(bytes);
}

// One MPI message of a split payload: bytes [offset, offset + size) of a buffer.
struct Piece {
  int64_t offset;
  int size;
};

std::vector<Piece> pieces_of(int64_t bytes, int64_t max_piece) {
  std::vector<Piece> out;
  for (int64_t at = 0; at < bytes; at += max_piece) {
    out.push_back({at, static_cast<int>(std::min(max_piece, bytes - at))});
  }
  return out;
}

}  // namespace

struct MpiCommunicator::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;  // split from another: freed here (MPI_COMM_WORLD is not)
};

namespace {

CommunicationStats g_stats;  // MPI runs serialized: one thread at a time

// Adds the scope's duration to `seconds` (busy or idle) of g_stats.
class Timed {
 public:
  Timed(double& seconds, int64_t bytes)
      : seconds_(seconds), start_(std::chrono::steady_clock::now()) {
    g_stats.bytes_sent += bytes;
    ++g_stats.calls;
  }
  ~Timed() {
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double& seconds_;
  std::chrono::steady_clock::time_point start_;
};

int64_t total(std::span<const int64_t> counts) {
  int64_t sum = 0;
  for (int64_t c : counts) sum += c;
  return sum;
}

}  // namespace

CommunicationStats communication_stats() {
  return g_stats;
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const int n = env_int(name); n > 0) return n;
  }
  return 1;
}

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const int r = env_int(name); r >= 0) return r;
  }
  return 0;
}

bool mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

void mpi_init() {
  if (mpi_initialized()) return;
  int provided = MPI_THREAD_SINGLE;
  // MULTIPLE when the library has it: the heartbeat (heartbeat.h) talks beside the compute.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  DI_CHECK(provided >= MPI_THREAD_SERIALIZED, "MPI: the library gives thread level ", provided,
           ", below MPI_THREAD_SERIALIZED, which deepinfer needs (its engine may run on a "
           "thread other than main)");
}

void mpi_finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (mpi_initialized() && finalized == 0) MPI_Finalize();
}

void mpi_abort_job(int code) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!mpi_initialized() || finalized != 0) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handle> handle) : handle_(std::move(handle)) {
  MPI_Comm_rank(handle_->comm, &rank_);
  MPI_Comm_size(handle_->comm, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (handle_->owned && finalized == 0) MPI_Comm_free(&handle_->comm);
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::world() {
  DI_CHECK(mpi_initialized(), "MpiCommunicator::world: MPI is not initialised (mpi_init)");
  auto handle = std::make_unique<Handle>();
  handle->comm = MPI_COMM_WORLD;
  return std::shared_ptr<MpiCommunicator>(new MpiCommunicator(std::move(handle)));
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::split_mpi(int color, int key) {
  auto handle = std::make_unique<Handle>();
  MPI_Comm_split(handle_->comm, color, key, &handle->comm);
  handle->owned = true;
  auto out = std::shared_ptr<MpiCommunicator>(new MpiCommunicator(std::move(handle)));
  out->max_message_bytes_ = max_message_bytes_;
  return out;
}

void MpiCommunicator::set_max_message_bytes(int64_t bytes) {
  DI_CHECK(bytes >= 1 && bytes <= INT32_MAX, "MPI max message bytes must be in [1, 2^31), got ",
           bytes);
  max_message_bytes_ = bytes;
}

void MpiCommunicator::barrier() {
  const Timed timed(g_stats.busy_seconds, 0);
  MPI_Barrier(handle_->comm);
}

void MpiCommunicator::all_reduce_sum(std::span<float> data) {
  if (size_ == 1 || data.empty()) return;
  std::vector<float> all(data.size() * static_cast<size_t>(size_));
  all_gather_bytes(std::as_bytes(data), std::as_writable_bytes(std::span<float>(all)));
  // Rank 0 first, then each rank in order: the same rounding on every rank, every run.
  for (size_t i = 0; i < data.size(); ++i) {
    float sum = all[i];
    for (size_t r = 1; r < static_cast<size_t>(size_); ++r) sum += all[r * data.size() + i];
    data[i] = sum;
  }
}

void MpiCommunicator::all_gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv) {
  const Timed timed(g_stats.busy_seconds, static_cast<int64_t>(send.size()));
  DI_CHECK(recv.size() == send.size() * static_cast<size_t>(size_),
           "all_gather: receive buffer of ", recv.size(), " bytes for ", send.size(),
           " bytes from each of ", size_, " ranks");
  const auto bytes = static_cast<int64_t>(send.size());
  if (bytes <= max_message_bytes_) {
    MPI_Allgather(send.data(), static_cast<int>(bytes), MPI_BYTE, recv.data(),
                  static_cast<int>(bytes), MPI_BYTE, handle_->comm);
    return;
  }
  std::vector<std::byte> gathered;
  for (const Piece& p : pieces_of(bytes, max_message_bytes_)) {
    gathered.resize(static_cast<size_t>(p.size) * static_cast<size_t>(size_));
    MPI_Allgather(send.data() + p.offset, p.size, MPI_BYTE, gathered.data(), p.size, MPI_BYTE,
                  handle_->comm);
    for (int64_t r = 0; r < size_; ++r) {
      std::memcpy(recv.data() + r * bytes + p.offset, gathered.data() + r * p.size,
                  static_cast<size_t>(p.size));
    }
  }
}

std::vector<int64_t> MpiCommunicator::exchange_counts(std::span<const int64_t> send_bytes) {
  const Timed timed(g_stats.busy_seconds, static_cast<int64_t>(send_bytes.size_bytes()));
  DI_CHECK(static_cast<int>(send_bytes.size()) == size_, "exchange_counts: ", send_bytes.size(),
           " counts for a world of ", size_, " ranks");
  std::vector<int64_t> recv(static_cast<size_t>(size_));
  MPI_Alltoall(send_bytes.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T, handle_->comm);
  return recv;
}

void MpiCommunicator::all_to_all_v_bytes(std::span<const std::byte> send,
                                         std::span<const int64_t> send_bytes,
                                         std::span<std::byte> recv,
                                         std::span<const int64_t> recv_bytes) {
  const Timed timed(g_stats.busy_seconds, total(send_bytes));
  DI_CHECK(
      static_cast<int>(send_bytes.size()) == size_ && static_cast<int>(recv_bytes.size()) == size_,
      "all_to_all_v: ", send_bytes.size(), " send and ", recv_bytes.size(),
      " receive counts for a world of ", size_, " ranks");
  int64_t send_total = 0, recv_total = 0, largest = 0;
  for (int r = 0; r < size_; ++r) {
    send_total += send_bytes[static_cast<size_t>(r)];
    recv_total += recv_bytes[static_cast<size_t>(r)];
    largest =
        std::max({largest, send_bytes[static_cast<size_t>(r)], recv_bytes[static_cast<size_t>(r)]});
  }
  DI_CHECK(send_total == static_cast<int64_t>(send.size()) &&
               recv_total == static_cast<int64_t>(recv.size()),
           "all_to_all_v: counts add up to ", send_total, " bytes sent and ", recv_total,
           " received, but the buffers hold ", send.size(), " and ", recv.size());
  // MPI_Alltoallv takes int counts and displacements: whole buffers within that range go in
  // one call, larger ones piecewise.
  if (std::max(send_total, recv_total) > max_message_bytes_ || largest > max_message_bytes_) {
    all_to_all_v_pieces(send, send_bytes, recv, recv_bytes);
    return;
  }
  std::vector<int> sc(static_cast<size_t>(size_)), sd(sc.size()), rc(sc.size()), rd(sc.size());
  int send_at = 0, recv_at = 0;
  for (size_t r = 0; r < sc.size(); ++r) {
    sc[r] = to_int(send_bytes[r], "all_to_all_v");
    rc[r] = to_int(recv_bytes[r], "all_to_all_v");
    sd[r] = send_at;
    rd[r] = recv_at;
    send_at += sc[r];
    recv_at += rc[r];
  }
  MPI_Alltoallv(send.data(), sc.data(), sd.data(), MPI_BYTE, recv.data(), rc.data(), rd.data(),
                MPI_BYTE, handle_->comm);
}

void MpiCommunicator::all_to_all_v_pieces(std::span<const std::byte> send,
                                          std::span<const int64_t> send_bytes,
                                          std::span<std::byte> recv,
                                          std::span<const int64_t> recv_bytes) {
  // Point to point, one tag: MPI keeps messages between two ranks on one tag in order, so
  // piece i of a block always lands in piece i's place.
  constexpr int kTag = 7100;
  std::vector<MPI_Request> requests;
  int64_t send_at = 0, recv_at = 0;
  std::vector<int64_t> send_offset(static_cast<size_t>(size_)), recv_offset(send_offset.size());
  for (size_t r = 0; r < send_offset.size(); ++r) {
    send_offset[r] = send_at;
    recv_offset[r] = recv_at;
    send_at += send_bytes[r];
    recv_at += recv_bytes[r];
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (const Piece& p : pieces_of(recv_bytes[static_cast<size_t>(r)], max_message_bytes_)) {
      requests.emplace_back();
      MPI_Irecv(recv.data() + recv_offset[static_cast<size_t>(r)] + p.offset, p.size, MPI_BYTE, r,
                kTag, handle_->comm, &requests.back());
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (const Piece& p : pieces_of(send_bytes[static_cast<size_t>(r)], max_message_bytes_)) {
      requests.emplace_back();
      MPI_Isend(send.data() + send_offset[static_cast<size_t>(r)] + p.offset, p.size, MPI_BYTE, r,
                kTag, handle_->comm, &requests.back());
    }
  }
  const auto self = static_cast<size_t>(rank_);
  DI_CHECK(send_bytes[self] == recv_bytes[self], "all_to_all_v: rank ", rank_, " sends itself ",
           send_bytes[self], " bytes but expects ", recv_bytes[self]);
  if (send_bytes[self] > 0) {
    std::memcpy(recv.data() + recv_offset[self], send.data() + send_offset[self],
                static_cast<size_t>(send_bytes[self]));
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

void MpiCommunicator::broadcast_bytes(std::span<std::byte> data, int root) {
  const Timed timed(g_stats.busy_seconds, rank_ == root ? static_cast<int64_t>(data.size()) : 0);
  DI_CHECK(root >= 0 && root < size_, "broadcast: root rank ", root, " outside a world of ", size_,
           " ranks");
  for (const Piece& p : pieces_of(static_cast<int64_t>(data.size()), max_message_bytes_)) {
    MPI_Bcast(data.data() + p.offset, p.size, MPI_BYTE, root, handle_->comm);
  }
}

void MpiCommunicator::broadcast_bytes_idle(std::span<std::byte> data, int root) {
  const Timed timed(g_stats.idle_seconds, rank_ == root ? static_cast<int64_t>(data.size()) : 0);
  DI_CHECK(root >= 0 && root < size_, "broadcast: root rank ", root, " outside a world of ", size_,
           " ranks");
  for (const Piece& p : pieces_of(static_cast<int64_t>(data.size()), max_message_bytes_)) {
    MPI_Request request;
    MPI_Ibcast(data.data() + p.offset, p.size, MPI_BYTE, root, handle_->comm, &request);
    if (rank_ == root) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      continue;
    }
    // Polls back off from 20 us to 1 ms: a step that was already sent is picked up at once,
    // an idle wait costs next to no CPU.
    auto pause = std::chrono::microseconds(20);
    for (int done = 0;;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done != 0) break;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
}

void MpiCommunicator::send_bytes(std::span<const std::byte> data, int dest) {
  const Timed timed(g_stats.busy_seconds, static_cast<int64_t>(data.size()));
  DI_CHECK(dest >= 0 && dest < size_ && dest != rank_, "send: rank ", rank_, " to rank ", dest,
           " in a world of ", size_, " ranks");
  constexpr int kTag = 7200;  // point to point, apart from the all-to-all's messages
  for (const Piece& p : pieces_of(static_cast<int64_t>(data.size()), max_message_bytes_)) {
    MPI_Send(data.data() + p.offset, p.size, MPI_BYTE, dest, kTag, handle_->comm);
  }
}

void MpiCommunicator::recv_bytes(std::span<std::byte> data, int source) {
  const Timed timed(g_stats.busy_seconds, 0);
  DI_CHECK(source >= 0 && source < size_ && source != rank_, "receive: rank ", rank_, " from rank ",
           source, " in a world of ", size_, " ranks");
  constexpr int kTag = 7200;
  for (const Piece& p : pieces_of(static_cast<int64_t>(data.size()), max_message_bytes_)) {
    MPI_Status status;
    MPI_Recv(data.data() + p.offset, p.size, MPI_BYTE, source, kTag, handle_->comm, &status);
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    DI_CHECK(got == p.size, "receive from rank ", source, ": ", got, " bytes where ", p.size,
             " were expected (the ranks disagree on the message size)");
  }
}

}  // namespace deepinfer::parallel
