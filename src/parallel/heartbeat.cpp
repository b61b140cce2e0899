#include "parallel/heartbeat.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::parallel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTag = 7301;
constexpr int64_t kBeat = 1;
constexpr int64_t kBye = 2;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

struct Heartbeat::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
};

double heartbeat_timeout_from_env() {
  const char* value = std::getenv("DEEPINFER_HEARTBEAT_TIMEOUT");
  if (value == nullptr || *value == '\0') return 10.0;
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  DI_CHECK(end != value && *end == '\0' && seconds >= 0, "DEEPINFER_HEARTBEAT_TIMEOUT = '", value,
           "': expected seconds >= 0 (0: no heartbeat)");
  return seconds;
}

std::shared_ptr<Heartbeat> Heartbeat::start(double timeout_s) {
  DI_CHECK(mpi_initialized(), "Heartbeat::start: MPI is not initialised");
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  // Every rank decides alike (same library, same environment), so the duplicate below is
  // made by all or by none.
  if (timeout_s <= 0 || provided < MPI_THREAD_MULTIPLE) {
    if (timeout_s > 0) {
      std::fprintf(stderr,
                   "deepinfer: warning: MPI gives no MPI_THREAD_MULTIPLE: no heartbeat, a rank "
                   "that stops answering hangs the job\n");
    }
    return nullptr;
  }
  std::shared_ptr<Heartbeat> hb(new Heartbeat(timeout_s));
  MPI_Comm_dup(MPI_COMM_WORLD, &hb->comm_->comm);
  int size = 1;
  MPI_Comm_rank(hb->comm_->comm, &hb->rank_);
  MPI_Comm_size(hb->comm_->comm, &size);
  if (hb->rank_ == 0) {
    for (int r = 1; r < size; ++r) hb->peers_.push_back(r);
  } else {
    hb->peers_.push_back(0);
  }
  hb->thread_ = std::thread([raw = hb.get()] { raw->run(); });
  return hb;
}

Heartbeat::Heartbeat(double timeout_s) : timeout_s_(timeout_s), comm_(std::make_unique<Comm>()) {}

Heartbeat::~Heartbeat() {
  stop();
}

void Heartbeat::on_fault(FaultHandler handler) {
  std::lock_guard lock(mutex_);
  handlers_.push_back(std::move(handler));
}

void Heartbeat::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::run() {
  const MPI_Comm comm = comm_->comm;
  const size_t n = peers_.size();
  // Per peer: one receive and one send outstanding at most, and when it was last heard.
  std::vector<MPI_Request> recv(n, MPI_REQUEST_NULL), send(n, MPI_REQUEST_NULL);
  std::vector<int64_t> inbox(n, 0), outbox(n, kBeat);
  std::vector<bool> watching(n, true);
  std::vector<Clock::time_point> heard(n, Clock::now());
  // Beats several times per timeout, at most every 0.5 s.
  const auto interval =
      std::chrono::duration<double>(std::min(0.5, std::max(0.02, timeout_s_ / 8)));
  for (;;) {
    for (size_t i = 0; i < n; ++i) {
      if (!watching[i]) continue;
      for (;;) {  // drain every beat that has arrived
        if (recv[i] == MPI_REQUEST_NULL) {
          MPI_Irecv(&inbox[i], 1, MPI_INT64_T, peers_[i], kTag, comm, &recv[i]);
        }
        int done = 0;
        MPI_Test(&recv[i], &done, MPI_STATUS_IGNORE);
        if (done == 0) break;
        heard[i] = Clock::now();
        if (inbox[i] == kBye) {
          watching[i] = false;  // it left in order: its silence from now on is no fault
          break;
        }
      }
      int sent = 1;
      if (send[i] != MPI_REQUEST_NULL) MPI_Test(&send[i], &sent, MPI_STATUS_IGNORE);
      if (sent != 0) MPI_Isend(&outbox[i], 1, MPI_INT64_T, peers_[i], kTag, comm, &send[i]);
      if (watching[i] && seconds_since(heard[i]) > timeout_s_) {
        fault(peers_[i], seconds_since(heard[i]));  // does not return
      }
    }
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, interval, [this] { return stopping_; })) break;
  }
  // Leaving: say so, and let the last messages go (a peer that is gone never takes them).
  for (size_t i = 0; i < n; ++i) {
    if (recv[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&recv[i]);
      MPI_Wait(&recv[i], MPI_STATUS_IGNORE);
    }
    int sent = 1;
    if (send[i] != MPI_REQUEST_NULL) MPI_Test(&send[i], &sent, MPI_STATUS_IGNORE);
    if (sent == 0) MPI_Request_free(&send[i]);
    outbox[i] = kBye;
    MPI_Isend(&outbox[i], 1, MPI_INT64_T, peers_[i], kTag, comm, &send[i]);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  for (size_t i = 0; i < n; ++i) {
    for (int done = 0; done == 0;) {
      MPI_Test(&send[i], &done, MPI_STATUS_IGNORE);
      if (done == 0 && Clock::now() > deadline) {
        MPI_Request_free(&send[i]);
        break;
      }
      if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // The duplicate is left to MPI_Finalize: freeing it is collective, and a peer may be gone.
}

void Heartbeat::fault(int peer, double silent_s) {
  const std::string message =
      peer == 0 ? str_cat("rank 0 (the driver) has not answered the heartbeat for ",
                          static_cast<int64_t>(silent_s),
                          " s (stopped, hung or unreachable); "
                          "ending every rank (DEEPINFER_HEARTBEAT_TIMEOUT=",
                          timeout_s_, ")")
                : str_cat("rank ", peer, " has not answered the heartbeat for ",
                          static_cast<int64_t>(silent_s),
                          " s (stopped, hung or unreachable); ending every rank "
                          "(DEEPINFER_HEARTBEAT_TIMEOUT=",
                          timeout_s_, ")");
  std::fprintf(stderr, "deepinfer: error: rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  std::vector<FaultHandler> handlers;
  {
    std::lock_guard lock(mutex_);
    handlers = handlers_;
  }
  for (const auto& handler : handlers) {
    try {
      handler(message);
    } catch (...) {
      // Ending the job matters more than a handler's failure.
    }
  }
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; should it, this rank still ends
}

}  // namespace deepinfer::parallel
