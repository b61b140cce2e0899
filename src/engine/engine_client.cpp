#include "engine/engine_client.h"

#include "core/error.h"
#include "core/log.h"

namespace deepinfer::engine {

std::optional<RequestOutput> RequestStream::next(std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mutex_);
  const auto ready = [this] { return !queue_.empty() || done_; };
  if (timeout) {
    if (!ready_.wait_for(lock, *timeout, ready)) return std::nullopt;
  } else {
    ready_.wait(lock, ready);
  }
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  if (!out.error.empty()) throw Error(out.error);
  return out;
}

bool RequestStream::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void RequestStream::push(RequestOutput out) {
  {
    std::lock_guard lock(mutex_);
    if (done_) return;
    done_ = out.finished;
    queue_.push_back(std::move(out));
  }
  ready_.notify_all();
}

EngineClient::EngineClient(Engine& engine) : engine_(engine) {
  DI_CHECK(!engine.has_unfinished(), "EngineClient: the engine already has requests in flight");
  stats_ = engine.stats();
  thread_ = std::thread([this] { loop(); });
}

EngineClient::~EngineClient() {
  shutdown();
}

RequestId EngineClient::enqueue_add(std::vector<int32_t> prompt, const SamplingParams& params,
                                    int64_t priority,
                                    const std::function<Callback(RequestId)>& make_sink) {
  engine_.check_request(prompt, params);  // immutable engine state: safe from any thread
  RequestId id = 0;
  {
    std::lock_guard lock(mutex_);
    DI_CHECK(!stopping_, "the engine is shutting down; request refused");
    id = next_id_++;
    inbox_.push_back({Command::Kind::add, id, std::move(prompt), params, priority, make_sink(id)});
  }
  wake_.notify_one();
  return id;
}

std::shared_ptr<RequestStream> EngineClient::submit(std::vector<int32_t> prompt_ids,
                                                    const SamplingParams& params,
                                                    int64_t priority) {
  std::shared_ptr<RequestStream> stream;
  enqueue_add(std::move(prompt_ids), params, priority, [&stream](RequestId id) -> Callback {
    stream = std::make_shared<RequestStream>(id);
    return [s = stream](const RequestOutput& out) { s->push(out); };
  });
  return stream;
}

std::shared_ptr<RequestStream> EngineClient::submit_text(const std::string& prompt,
                                                         const SamplingParams& params,
                                                         int64_t priority) {
  return submit(engine_.encode(prompt), params, priority);
}

RequestId EngineClient::submit(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                               int64_t priority, Callback on_output) {
  DI_CHECK(on_output != nullptr, "EngineClient::submit: the callback is empty");
  return enqueue_add(std::move(prompt_ids), params, priority,
                     [&on_output](RequestId) { return std::move(on_output); });
}

void EngineClient::abort(RequestId id) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    inbox_.push_back({Command::Kind::abort, id, {}, {}, 0, {}});
  }
  wake_.notify_one();
}

EngineStats EngineClient::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void EngineClient::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineClient::deliver(const std::vector<RequestOutput>& outputs) {
  for (const RequestOutput& out : outputs) {
    const auto it = sinks_.find(out.id);
    if (it == sinks_.end()) continue;
    try {
      it->second(out);
    } catch (const std::exception& e) {
      log::error("engine client: an output callback threw: ", e.what());
    }
    if (out.finished) sinks_.erase(it);
  }
}

void EngineClient::fail_all(const std::string& message) {
  std::vector<RequestOutput> outputs;
  for (const auto& [id, sink] : sinks_) {
    engine_.abort(id);
    RequestOutput out;
    out.id = id;
    out.finished = true;
    out.error = message;
    outputs.push_back(std::move(out));
  }
  try {
    engine_.step();  // drops the aborted requests (nothing is left to run)
  } catch (const std::exception&) {
  }
  deliver(outputs);
}

void EngineClient::loop() {
  bool stopping = false;
  while (true) {
    std::vector<Command> commands;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || engine_.has_unfinished(); });
      commands.swap(inbox_);
      stopping = stopping_;
    }
    for (Command& c : commands) {
      if (c.kind == Command::Kind::add) {
        try {
          engine_.add_request(std::move(c.prompt), c.params, c.priority, c.id);
          sinks_.emplace(c.id, std::move(c.sink));
        } catch (const std::exception& e) {
          RequestOutput out;
          out.id = c.id;
          out.finished = true;
          out.error = e.what();
          c.sink(out);
        }
      } else {
        engine_.abort(c.id);
      }
    }
    if (stopping) {
      for (const auto& [id, sink] : sinks_) engine_.abort(id);
    }
    try {
      if (engine_.has_unfinished()) deliver(engine_.step());
    } catch (const std::exception& e) {
      log::error("engine step failed: ", e.what());
      fail_all(std::string("the engine failed: ") + e.what());
    }
    {
      std::lock_guard lock(mutex_);
      stats_ = engine_.stats();
    }
    if (stopping && !engine_.has_unfinished()) break;
  }
}

}  // namespace deepinfer::engine
