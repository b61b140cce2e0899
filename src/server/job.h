#pragma once
// One HTTP generation request in flight: its engine requests (one per prompt, each with n
// choices), the outputs the engine loop hands over, and the timings the metrics record.
// The engine loop thread calls on_output; the HTTP thread waits for events.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "server/metrics.h"

namespace deepinfer::server {

// State shared by the server and its jobs (jobs may outlive an HTTP handler: the engine hands
// over an aborted request's final output a step later).
struct SharedState {
  explicit SharedState(std::string model_name) : metrics(std::move(model_name)) {}
  Metrics metrics;
  // Engine requests accepted but without output yet (queued or in prefill), and their prompt
  // tokens; the admission limits (--max-waiting-requests / --max-waiting-tokens) count these.
  std::atomic<int64_t> not_started{0};
  std::atomic<int64_t> not_started_tokens{0};
};

// One step's progress of one choice; `choice` = prompt index * n + sibling index.
struct JobEvent {
  int64_t choice = 0;
  engine::CompletionDelta delta;
};

class Job : public std::enable_shared_from_this<Job> {
 public:
  using Clock = std::chrono::steady_clock;

  // `arrival`: when the HTTP request arrived (TTFT and latency start there). The caller has
  // already counted every prompt in shared->not_started and its tokens (`prompt_tokens`, one
  // per prompt) in shared->not_started_tokens.
  Job(engine::EngineClient& client, std::shared_ptr<SharedState> shared,
      std::vector<int64_t> prompt_tokens, int64_t n, Clock::time_point arrival);
  ~Job();

  // Submits prompt `index` (prompts are submitted in order). Throws Error when the engine
  // refuses it; the caller then abort()s the job.
  void submit(size_t index, std::vector<int32_t> prompt_ids, const engine::SamplingParams& params,
              int64_t priority);
  // `listener` runs (on the engine's thread, after the events are queued) whenever there is
  // news: events or the end. Set it before submit(); it must not block.
  void set_listener(std::function<void()> listener);
  // Moves the pending events into `out`; waits up to `timeout` when there are none.
  // Returns false when it timed out with nothing new.
  bool wait_events(std::vector<JobEvent>& out, std::chrono::milliseconds timeout);
  // Every engine request has delivered its final output (events may still be pending).
  bool finished() const;
  // Aborts the engine requests still running (client gone, shutdown). Idempotent.
  void abort();
  // Set when the engine failed while running a request of this job.
  std::string error() const;
  // Ends the job now with `message` as its error, whatever the engine does (it may be stuck:
  // the server failed); later outputs of the engine are ignored.
  void fail(const std::string& message);

  int64_t prompt_tokens() const;      // sum over prompts
  int64_t completion_tokens() const;  // sum over choices, every sampled token counted
  // Prompt `index`'s engine prompt logprobs (SamplingParams::prompt_logprobs; entry i for prompt
  // token i + 1): empty until delivered, which is before the first event of its choices.
  std::vector<engine::TokenLogprobs> prompt_logprobs(size_t index) const;

 private:
  struct Part {
    engine::RequestId id = 0;
    bool submitted = false;
    bool started = false;  // has produced output (left the not-started count)
    bool done = false;
    int64_t prompt_tokens = 0;
    int64_t generated = 0;
    std::vector<engine::TokenLogprobs> prompt_logprobs;
    Clock::time_point submitted_at;
    Clock::time_point last_output;
  };

  void on_output(size_t index, const engine::RequestOutput& out);
  void leave_not_started(Part& part);

  engine::EngineClient& client_;
  std::shared_ptr<SharedState> shared_;
  const int64_t n_;
  const Clock::time_point arrival_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<Part> parts_;
  std::vector<JobEvent> events_;
  size_t num_done_ = 0;
  bool aborted_ = false;
  std::string error_;
  std::function<void()> listener_;
};

}  // namespace deepinfer::server
