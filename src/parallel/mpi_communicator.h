#pragma once
// The Communicator over MPI: the ranks of one MPI communicator (the world, or a group split
// from it). <mpi.h> stays inside the .cpp, so only this folder compiles against MPI.
//
// MPI itself is started only on demand (mpi_init below): a process of world size 1 never
// calls MPI_Init, so the single-process path needs no MPI at run time (docs/DISTRIBUTED.md).
//
// Deterministic by construction: all_reduce_sum gathers every rank's values and sums them in
// rank order on each rank (MPI_Allreduce leaves the order to the library), so every rank, and
// every run, gets bitwise the same sums.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "parallel/communicator.h"

namespace deepinfer::parallel {

// Environment of the launcher (OpenMPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE of MPICH / Hydra):
// how many ranks mpirun started, 1 when not launched by mpirun. Reads no MPI state.
int launcher_world_size();
int launcher_rank();

// MPI_Init_thread once per process (later calls do nothing), asking for MPI_THREAD_MULTIPLE
// (the heartbeat thread talks beside the compute) and needing at least MPI_THREAD_SERIALIZED
// (one thread at a time calls MPI): throws Error below that.
void mpi_init();
bool mpi_initialized();
// At the end of main: MPI_Finalize when mpi_init ran (no-op otherwise).
void mpi_finalize();
// After an error on any rank: ends every rank of the job (MPI_Abort), so none is left waiting
// in a collective. No-op unless MPI runs with more than one rank.
void mpi_abort_job(int code);

// Time this process spent in MPI calls since it started, over all its communicators: `busy`
// is collectives and messages during steps (transfer and waiting for slower peers), `idle`
// a lockstep worker's wait for the next step (broadcast_bytes_idle). For per-rank timers.
struct CommunicationStats {
  double busy_seconds = 0;
  double idle_seconds = 0;
  int64_t bytes_sent = 0;  // payload bytes this rank sent or contributed
  int64_t calls = 0;
};
CommunicationStats communication_stats();

class MpiCommunicator : public Communicator {
 public:
  // MPI_COMM_WORLD (mpi_init() must have run).
  static std::shared_ptr<MpiCommunicator> world();
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // MPI_Comm_split: the ranks giving the same `color` form one group, ordered by `key`.
  // Collective over this communicator.
  std::shared_ptr<MpiCommunicator> split_mpi(int color, int key);
  std::shared_ptr<Communicator> split(int color, int key) override { return split_mpi(color, key); }
  // Largest message one MPI call carries (default 1 GiB, below MPI's int counts); bigger
  // payloads go in pieces. Tests lower it to exercise the piecewise paths.
  void set_max_message_bytes(int64_t bytes);

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  void barrier() override;
  void all_reduce_sum(std::span<float> data) override;
  void all_gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv) override;
  std::vector<int64_t> exchange_counts(std::span<const int64_t> send_bytes) override;
  void all_to_all_v_bytes(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                          std::span<std::byte> recv, std::span<const int64_t> recv_bytes) override;
  void broadcast_bytes(std::span<std::byte> data, int root) override;
  // A waiting (non-root) rank sleeps between polls instead of spinning: a worker waiting for
  // its next step (rank 0 tokenizing, sampling, or idle) leaves the cores to others.
  void broadcast_bytes_idle(std::span<std::byte> data, int root) override;
  void send_bytes(std::span<const std::byte> data, int dest) override;
  void recv_bytes(std::span<std::byte> data, int source) override;

 private:
  struct Handle;
  explicit MpiCommunicator(std::unique_ptr<Handle> handle);
  void all_to_all_v_pieces(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                           std::span<std::byte> recv, std::span<const int64_t> recv_bytes);

  std::unique_ptr<Handle> handle_;
  int rank_ = 0;
  int size_ = 1;
  int64_t max_message_bytes_ = int64_t{1} << 30;
};

}  // namespace deepinfer::parallel
