#pragma once
// A thread-safe front for the Engine: any thread submits requests and aborts; one loop
// thread owns the engine and steps it while there is work, handing each request's outputs
// to its stream (or callback). This is what the HTTP server talks to.
//
//   EngineClient client(engine);
//   auto stream = client.submit(prompt_ids, params);
//   while (auto out = stream->next()) { ... if (out->finished) break; }
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::engine {

// The outputs of one request, in order, as the loop thread produces them.
class RequestStream {
 public:
  explicit RequestStream(RequestId id) : id_(id) {}
  RequestId id() const { return id_; }

  // The next output; blocks until there is one, or `timeout` passes (nullopt). After the
  // final output (finished == true) it returns nullopt at once. Throws Error when the engine
  // failed while running this request.
  std::optional<RequestOutput> next(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool done() const;  // the final output has been produced (maybe not read yet)

  // Loop-thread side.
  void push(RequestOutput out);

 private:
  RequestId id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestOutput> queue_;
  bool done_ = false;
  std::string error_;
};

class EngineClient {
 public:
  using Callback = std::function<void(const RequestOutput&)>;

  // Starts the loop thread; `engine` must outlive the client and must not be used directly
  // meanwhile.
  explicit EngineClient(Engine& engine);
  ~EngineClient();  // shutdown()
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  // Validates at once (throws Error for a request add_request would reject), then queues.
  std::shared_ptr<RequestStream> submit(std::vector<int32_t> prompt_ids,
                                        const SamplingParams& params, int64_t priority = 0);
  std::shared_ptr<RequestStream> submit_text(const std::string& prompt,
                                             const SamplingParams& params, int64_t priority = 0);
  // Callback flavour: `on_output` runs on the loop thread (keep it short, never call back
  // into the client from it... except abort(), which only queues).
  RequestId submit(std::vector<int32_t> prompt_ids, const SamplingParams& params, int64_t priority,
                   Callback on_output);
  // Aborts a request wherever it is (no-op when finished or unknown); its stream gets a final
  // output with finish_reason abort.
  void abort(RequestId id);

  // Snapshot taken after the latest step.
  EngineStats stats() const;
  // Aborts everything in flight, delivers the final outputs and stops the loop. Idempotent.
  void shutdown();

 private:
  struct Command {
    enum class Kind { add, abort } kind = Kind::add;
    RequestId id = 0;
    std::vector<int32_t> prompt;
    SamplingParams params;
    int64_t priority = 0;
    Callback sink;
  };

  RequestId enqueue_add(std::vector<int32_t> prompt, const SamplingParams& params, int64_t priority,
                        const std::function<Callback(RequestId)>& make_sink);
  void loop();
  void deliver(const std::vector<RequestOutput>& outputs);
  void fail_all(const std::string& message);

  Engine& engine_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Command> inbox_;
  bool stopping_ = false;
  RequestId next_id_ = 1;
  EngineStats stats_;
  std::map<RequestId, Callback> sinks_;  // loop thread only
  std::thread thread_;
};

}  // namespace deepinfer::engine
