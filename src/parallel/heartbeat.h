#pragma once
// Liveness of the ranks of a distributed run (docs/DISTRIBUTED.md, "Faults"). A rank that
// dies is OpenMPI's to notice: mpirun then ends the whole job at once (measured: within about
// a second of a SIGKILL, naming the rank). A rank that stops answering without dying
// (SIGSTOP, a hung host, a cut link) is this class's: each rank runs a thread that beats on
// its own duplicate of the world communicator, beside the compute, so a long prefill is not
// a hang. Rank 0 watches every worker, each worker watches rank 0; a peer silent for
// `timeout_s` is a fault: the thread prints one line naming the rank, runs the fault
// handlers (the HTTP server answers 503 and ends its streams with an error) and ends every
// rank of the job (MPI_Abort), so mpirun exits non-zero.
//
// Needs MPI_THREAD_MULTIPLE (mpi_init asks for it); without it, or with timeout 0
// (DEEPINFER_HEARTBEAT_TIMEOUT=0), no heartbeat runs and a silent rank hangs the job.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace deepinfer::parallel {

// Seconds a peer may stay silent: DEEPINFER_HEARTBEAT_TIMEOUT when set (0: no heartbeat),
// else 10. Throws Error for a value that is not a number >= 0.
double heartbeat_timeout_from_env();

class Heartbeat {
 public:
  using FaultHandler = std::function<void(const std::string& message)>;

  // Collective over MPI_COMM_WORLD (MPI must run): duplicates it and starts beating. Returns
  // null when the timeout is 0 or MPI lacks MPI_THREAD_MULTIPLE (logged).
  static std::shared_ptr<Heartbeat> start(double timeout_s);
  ~Heartbeat();  // stop()
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Runs on the heartbeat thread when a fault is found, before the job ends; it may block
  // for a few seconds (to answer clients) but must not call MPI.
  void on_fault(FaultHandler handler);
  // Tells the watched peers this rank leaves (they stop expecting it) and ends the thread.
  // Idempotent; the destructor calls it.
  void stop();

  double timeout_s() const { return timeout_s_; }

  struct Comm;

 private:
  explicit Heartbeat(double timeout_s);
  void run();
  void fault(int peer, double silent_s);

  const double timeout_s_;
  std::unique_ptr<Comm> comm_;
  int rank_ = 0;
  std::vector<int> peers_;  // rank 0: every worker; a worker: rank 0
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<FaultHandler> handlers_;
  std::thread thread_;
};

}  // namespace deepinfer::parallel
