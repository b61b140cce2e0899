#include "server/generation_response.h"

#include <optional>

#include "server/tool_stream.h"

namespace deepinfer::server {

namespace {

// Appends the text of one delta to a choice (non-streamed path).
void accumulate(ChoiceResult& c, const engine::CompletionDelta& d, bool include_stop) {
  c.text += d.text;
  c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  if (d.finish_reason != engine::FinishReason::none) {
    c.finish_reason = d.finish_reason;
    c.stop = d.stop;
    if (include_stop) c.text += d.stop;
  }
}

class ResponseBase : public GenerationResponse {
 public:
  ResponseBase(ApiServer::Impl& server, std::shared_ptr<Job> job, Reply reply, ResponsePlan plan)
      : server_(server), job_(std::move(job)), reply_(std::move(reply)), plan_(std::move(plan)) {}
  std::shared_ptr<Job> job() const override { return job_; }

  void pump() override {
    if (done_) return;
    std::vector<JobEvent> events;
    job_->wait_events(events, std::chrono::milliseconds(0));
    const bool finished = job_->finished();
    if (finished) job_->wait_events(events, std::chrono::milliseconds(0));  // racing in
    on_events(events, finished);
    if (finished) {
      done_ = true;
      server_.remove_response(this);
    }
  }

 protected:
  virtual void on_events(const std::vector<JobEvent>& events, bool finished) = 0;

  ApiServer::Impl& server_;
  std::shared_ptr<Job> job_;
  Reply reply_;
  ResponsePlan plan_;
  bool done_ = false;

  // The job's error as the client sees it: 503 when the server failed (the engine is gone,
  // the error says why), else 500.
  ApiError engine_error(const std::string& error) const {
    if (server_.state.load() == ServerState::failed) return ApiError(503, error);
    return ApiError(500, str_cat("the engine failed: ", error));
  }

  // The prompt ids of choice `i` (kept in the plan when the response shows them).
  const std::vector<int32_t>& prompt_of(size_t i) const {
    return plan_.prompt_ids.at(i / static_cast<size_t>(plan_.n));
  }
};

// Non-streamed: accumulates the choices and answers once the job has finished.
class WholeResponse : public ResponseBase {
 public:
  WholeResponse(ApiServer::Impl& server, std::shared_ptr<Job> job, Reply reply, ResponsePlan plan)
      : ResponseBase(server, std::move(job), std::move(reply), std::move(plan)),
        choices_(plan_.echo.size()) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      choices_[i].text = plan_.echo[i];
      if (plan_.meta.return_token_ids) choices_[i].prompt_token_ids = prompt_of(i);
    }
  }

 private:
  void on_events(const std::vector<JobEvent>& events, bool finished) override {
    for (const auto& e : events) {
      accumulate(choices_[static_cast<size_t>(e.choice)], e.delta, plan_.include_stop);
    }
    if (!finished) return;
    if (const auto error = job_->error(); !error.empty()) {
      reply_.send_error(engine_error(error));
      return;
    }
    // Offsets start after the echo prefix: response_json computes them from there.
    for (size_t i = 0; i < choices_.size(); ++i) {
      ChoiceResult& c = choices_[i];
      c.text_offset = plan_.echo[i].size();
      if (!plan_.echo_logprobs && !plan_.prompt_logprobs) continue;
      const auto logprobs = job_->prompt_logprobs(i / static_cast<size_t>(plan_.n));
      if (plan_.echo_logprobs) {
        c.echo_token_ids = prompt_of(i);
        c.echo_logprobs = logprobs;
      }
      if (plan_.prompt_logprobs) {
        c.prompt_logprobs = prompt_logprobs_json(*server_.tokenizer, prompt_of(i), logprobs,
                                                 *plan_.prompt_logprobs);
      }
    }
    if (plan_.tool_family != toolcall::Family::none) {
      for (auto& c : choices_) {
        parse_choice_tools(c, plan_.tool_family, plan_.tools, plan_.parallel_tool_calls);
      }
    }
    const Usage usage{job_->prompt_tokens(), job_->completion_tokens()};
    reply_.send_json(200,
                     dump_json(response_json(plan_.meta, *server_.tokenizer, choices_, usage)));
  }

  std::vector<ChoiceResult> choices_;
};

// Streamed: SSE chunks as the events arrive, then usage (if asked) and [DONE].
class StreamResponse : public ResponseBase {
 public:
  StreamResponse(ApiServer::Impl& server, std::shared_ptr<Job> job, Reply reply, ResponsePlan plan)
      : ResponseBase(server, std::move(job), std::move(reply), std::move(plan)),
        offsets_(plan_.echo.size()),
        echoed_(plan_.echo.size(), false) {
    for (size_t i = 0; i < offsets_.size(); ++i) offsets_[i] = plan_.echo[i].size();
    if (plan_.tool_family != toolcall::Family::none) {
      tools_.emplace(plan_.tool_family, plan_.tools, offsets_.size(), plan_.parallel_tool_calls);
    }
  }

  // The first chunks: the assistant role (chat) or the echoed prompt (completions).
  std::string opening() const {
    std::string out;
    const auto& meta = plan_.meta;
    for (size_t i = 0; i < plan_.echo.size(); ++i) {
      if (meta.api == Api::chat) {
        Json delta;
        delta["role"] = "assistant";
        delta["content"] = "";
        out += sse_event(chat_chunk(meta, static_cast<int64_t>(i), std::move(delta), Json(),
                                    engine::FinishReason::none));
      } else if (!plan_.echo[i].empty() && !plan_.echo_logprobs) {
        out += sse_event(completion_chunk(meta, static_cast<int64_t>(i), plan_.echo[i], Json(),
                                          engine::FinishReason::none));
      }
    }
    return out;
  }

 private:
  void on_events(const std::vector<JobEvent>& events, bool finished) override {
    std::string out;
    for (const auto& e : events) {
      if (plan_.echo_logprobs && !echoed_[static_cast<size_t>(e.choice)])
        out += echo_chunk(e.choice);
      out += render(e);
    }
    if (finished) {
      if (const auto error = job_->error(); !error.empty()) {
        out += sse_event(engine_error(error).to_json());
      } else if (plan_.meta.include_usage) {
        out +=
            sse_event(usage_chunk(plan_.meta, {job_->prompt_tokens(), job_->completion_tokens()}));
      }
      out += "data: [DONE]\n\n";
    }
    if (!out.empty()) reply_.exchange->write_chunk(std::move(out));
    if (finished) reply_.exchange->end_stream();
  }

  // SSE text for one event.
  std::string render(const JobEvent& e) {
    const auto& meta = plan_.meta;
    const auto& d = e.delta;
    std::string text = d.text;
    const bool final = d.finish_reason != engine::FinishReason::none;
    if (final && plan_.include_stop) text += d.stop;
    Json logprobs;
    if (meta.logprobs && !d.token_ids.empty()) {
      logprobs = logprobs_json(meta, *server_.tokenizer, d.token_ids, d.logprobs,
                               offsets_[static_cast<size_t>(e.choice)]);
    }
    // Nothing to say: tokens without text yet (a character still incomplete, a possible stop
    // string or tool-call markup held back) and no logprobs asked for.
    const auto silent = [&](bool nothing_new) {
      return nothing_new && logprobs.is_null() && !final &&
             !(meta.return_token_ids && !d.token_ids.empty());
    };
    if (meta.api == Api::chat) {
      Json delta = Json::object();
      if (tools_) {
        delta = tools_->delta(e.choice, text, final);
      } else if (!text.empty()) {
        delta["content"] = text;
      }
      if (silent(delta.empty())) return {};
      Json chunk = chat_chunk(meta, e.choice, std::move(delta), std::move(logprobs),
                              d.finish_reason, d.token_ids);
      // As vLLM: a choice that made tool calls finishes with "tool_calls".
      if (final && tools_ && tools_->made_calls(e.choice)) {
        chunk["choices"][0]["finish_reason"] = "tool_calls";
      }
      return sse_event(chunk);
    }
    if (silent(text.empty())) return {};
    return sse_event(
        completion_chunk(meta, e.choice, text, std::move(logprobs), d.finish_reason, d.token_ids));
  }

  // Echo + logprobs: the echoed prompt goes out with its logprobs, which come with the
  // prompt's first engine output.
  std::string echo_chunk(int64_t choice) {
    const auto i = static_cast<size_t>(choice);
    echoed_[i] = true;
    size_t offset = 0;
    const auto logprobs = job_->prompt_logprobs(i / static_cast<size_t>(plan_.n));
    return sse_event(completion_chunk(
        plan_.meta, choice, plan_.echo[i],
        echo_logprobs_json(plan_.meta, *server_.tokenizer, prompt_of(i), logprobs, offset),
        engine::FinishReason::none));
  }

  std::vector<size_t> offsets_;  // per choice: completions logprobs text_offset
  std::vector<bool> echoed_;     // per choice: the echo chunk was sent (echo + logprobs)
  std::optional<ToolCallStream> tools_;
};

}  // namespace

std::shared_ptr<GenerationResponse> start_generation_response(ApiServer::Impl& server,
                                                              std::shared_ptr<Job> job, Reply reply,
                                                              ResponsePlan plan) {
  std::shared_ptr<GenerationResponse> response;
  if (plan.stream) {
    auto stream = std::make_shared<StreamResponse>(server, job, reply, std::move(plan));
    http::Response head;
    head.set_header("Content-Type", "text/event-stream");
    head.set_header("Cache-Control", "no-cache");
    head.body = stream->opening();
    reply.start_stream(std::move(head));
    response = std::move(stream);
  } else {
    response = std::make_shared<WholeResponse>(server, job, reply, std::move(plan));
  }
  server.add_response(response);
  std::weak_ptr<ResponsePump> weak_pump = server.pump;
  std::weak_ptr<GenerationResponse> weak_response = response;
  job->set_listener([weak_pump, weak_response] {
    const auto pump = weak_pump.lock();
    const auto target = weak_response.lock();
    if (pump && target) pump->post(target);
  });
  // The client leaving (or the server closing the connection) stops the generation; the
  // job's final output then ends the response.
  reply.exchange->on_close([job] { job->abort(); });
  server.pump->post(response);  // outputs that came before the listener was set
  return response;
}

}  // namespace deepinfer::server
