#include "server/job.h"

#include "core/error.h"

namespace deepinfer::server {

namespace {

double seconds(Job::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Job::Job(engine::EngineClient& client, std::shared_ptr<SharedState> shared,
         std::vector<int64_t> prompt_tokens, int64_t n, Clock::time_point arrival)
    : client_(client),
      shared_(std::move(shared)),
      n_(n),
      arrival_(arrival),
      parts_(prompt_tokens.size()) {
  for (size_t i = 0; i < parts_.size(); ++i) parts_[i].prompt_tokens = prompt_tokens[i];
}

Job::~Job() {
  // Prompts never submitted (a refused one and those after it) still hold their admission slot.
  for (Part& part : parts_) leave_not_started(part);
}

void Job::leave_not_started(Part& part) {
  if (part.started) return;
  part.started = true;
  shared_->not_started.fetch_sub(1);
  shared_->not_started_tokens.fetch_sub(part.prompt_tokens);
}

void Job::submit(size_t index, std::vector<int32_t> prompt_ids,
                 const engine::SamplingParams& params, int64_t priority) {
  {
    std::lock_guard lock(mutex_);
    Part& part = parts_.at(index);
    DI_CHECK(part.prompt_tokens == static_cast<int64_t>(prompt_ids.size()), "Job::submit: prompt ",
             index, " has another length than counted");
    part.submitted_at = Clock::now();
  }
  // The callback keeps the job alive until the engine's final output for this prompt.
  auto self = shared_from_this();
  const engine::RequestId id = client_.submit(
      std::move(prompt_ids), params, priority,
      [self, index](const engine::RequestOutput& out) { self->on_output(index, out); });
  std::lock_guard lock(mutex_);
  parts_[index].id = id;
  parts_[index].submitted = true;
  if (aborted_) client_.abort(id);
}

void Job::on_output(size_t index, const engine::RequestOutput& out) {
  const auto now = Clock::now();
  Metrics& metrics = shared_->metrics;
  std::function<void()> listener;
  {
    std::lock_guard lock(mutex_);
    Part& part = parts_[index];
    int64_t tokens = 0;
    for (const auto& d : out.completions) tokens += static_cast<int64_t>(d.token_ids.size());
    if (tokens > 0) {
      if (part.generated == 0) {
        metrics.observe_time_to_first_token(seconds(now - arrival_));
        metrics.observe_queue_time(seconds(now - part.submitted_at));
        metrics.add_prompt_tokens(part.prompt_tokens);
      } else {
        metrics.observe_inter_token_latency(seconds(now - part.last_output));
      }
      part.last_output = now;
      part.generated += tokens;
      metrics.add_generation_tokens(tokens);
    }
    // A scoring-only request (max_tokens 0) ends after its prefill without a token: its
    // prompt was processed all the same.
    const bool scored = out.finished && part.generated == 0 && !out.prompt_logprobs.empty();
    if (scored) {
      metrics.observe_queue_time(seconds(now - part.submitted_at));
      metrics.add_prompt_tokens(part.prompt_tokens);
    }
    if (tokens > 0 || out.finished) leave_not_started(part);
    if (!out.prompt_logprobs.empty()) part.prompt_logprobs = out.prompt_logprobs;
    for (const auto& d : out.completions) {
      if (d.finish_reason != engine::FinishReason::none) metrics.count_finished(d.finish_reason);
      events_.push_back({static_cast<int64_t>(index) * n_ + d.index, d});
    }
    if (!out.error.empty() && error_.empty()) error_ = out.error;
    if (out.finished && !part.done) {
      part.done = true;
      ++num_done_;
      metrics.observe_e2e_latency(seconds(now - arrival_));
      metrics.observe_request_tokens(part.prompt_tokens, part.generated);
    }
    listener = listener_;
  }
  ready_.notify_all();
  if (listener) listener();
}

void Job::set_listener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

bool Job::wait_events(std::vector<JobEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const bool any = ready_.wait_for(lock, timeout, [this] {
    return !events_.empty() || num_done_ == parts_.size() || !error_.empty();
  });
  if (!any && events_.empty()) return false;
  for (auto& e : events_) out.push_back(std::move(e));
  events_.clear();
  return true;
}

bool Job::finished() const {
  std::lock_guard lock(mutex_);
  return num_done_ == parts_.size();
}

void Job::abort() {
  std::lock_guard lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  for (const Part& part : parts_) {
    if (part.submitted && !part.done) client_.abort(part.id);
  }
}

void Job::fail(const std::string& message) {
  std::function<void()> listener;
  {
    std::lock_guard lock(mutex_);
    if (num_done_ == parts_.size()) return;
    if (error_.empty()) error_ = message;
    for (Part& part : parts_) {
      if (!part.done) {
        part.done = true;
        ++num_done_;
      }
    }
    listener = listener_;
  }
  ready_.notify_all();
  if (listener) listener();
}

std::string Job::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

int64_t Job::prompt_tokens() const {
  std::lock_guard lock(mutex_);
  int64_t sum = 0;
  for (const Part& part : parts_) sum += part.prompt_tokens;
  return sum;
}

std::vector<engine::TokenLogprobs> Job::prompt_logprobs(size_t index) const {
  std::lock_guard lock(mutex_);
  return parts_.at(index).prompt_logprobs;
}

int64_t Job::completion_tokens() const {
  std::lock_guard lock(mutex_);
  int64_t sum = 0;
  for (const Part& part : parts_) sum += part.generated;
  return sum;
}

}  // namespace deepinfer::server
