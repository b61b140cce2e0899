// POST /v1/completions and /v1/chat/completions: request -> prompts -> engine -> response or
// SSE stream.
#include <chrono>
#include <ctime>
#include <optional>

#include "core/log.h"
#include "server/responses.h"
#include "server/server_impl.h"
#include "server/tool_request.h"
#include "server/tool_stream.h"

namespace deepinfer::server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(250);
// A stream silent for this long gets an SSE comment: writing is how a vanished client shows
// (a queued request is aborted within about two heartbeats of its client leaving).
constexpr auto kHeartbeat = std::chrono::seconds(1);

struct Prepared {
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> echo;  // per prompt: text prepended to every choice (echo)
  std::vector<engine::SamplingParams> params;
};

Prepared prepare(const ApiServer::Impl& s, GenerationRequest& r) {
  const ModelInfo& info = s.info;
  const tokenizer::Tokenizer& tok = *s.tokenizer;
  Prepared out;
  const char* param = r.api == Api::chat ? "messages" : "prompt";
  if (r.api == Api::chat) {
    const bool with_tools = r.tools.is_array() && !r.tools.empty();
    const tokenizer::ChatTemplate* chat =
        with_tools && info.tool_template ? info.tool_template.get() : info.chat_template.get();
    if (chat == nullptr) {
      throw ApiError(400,
                     "this model has no chat template (tokenizer_config.json has none); use "
                     "/v1/completions",
                     "messages");
    }
    const auto render = [&](const Json& messages) {
      return chat->render(messages, r.tools, r.add_generation_prompt, info.bos_token,
                          info.eos_token, r.chat_template_kwargs);
    };
    std::string text;
    // Tool-call arguments go in as mappings (what transformers' templates expect); a template
    // that concatenates them as strings (DeepSeek-V3, V3.1) fails on a mapping and gets them
    // as the request sent them.
    const auto mapped = with_mapping_arguments(r.messages);
    try {
      text = render(mapped ? *mapped : r.messages);
    } catch (const Error& e) {
      bool rendered = false;
      if (mapped) {
        try {
          text = render(r.messages);
          rendered = true;
        } catch (const Error&) {
        }
      }
      if (!rendered) {
        throw ApiError(400,
                       str_cat("the chat template could not render these messages: ", e.what()),
                       "messages");
      }
    }
    // The rendered prompt carries its own special tokens.
    out.prompt_ids.push_back(tok.encode(text, /*add_special_tokens=*/false));
    out.echo.emplace_back();
  } else {
    for (const Prompt& p : r.prompts) {
      out.prompt_ids.push_back(p.is_text ? tok.encode(p.text, true) : p.ids);
      out.echo.push_back(!r.echo     ? std::string()
                         : p.is_text ? p.text
                                     : tok.decode(p.ids, /*skip_special_tokens=*/false));
    }
  }
  for (const auto& ids : out.prompt_ids) {
    if (ids.empty()) bad_param(param, str_cat("'", param, "' is empty: it encodes to no tokens"));
    for (const int32_t id : ids) {
      if (id >= info.vocab_size) {
        bad_param(param, str_cat("'", param, "': token id ", id, " is outside the vocabulary [0, ",
                                 info.vocab_size, ")"));
      }
    }
    engine::SamplingParams p = r.params;
    p.max_new_tokens =
        resolve_max_tokens(r, static_cast<int64_t>(ids.size()), info.max_model_len, info.defaults);
    out.params.push_back(std::move(p));
  }
  for (const int64_t id : r.params.stop_token_ids) {
    if (id >= info.vocab_size) {
      bad_param("stop_token_ids", str_cat("'stop_token_ids': token id ", id,
                                          " is outside the vocabulary [0, ", info.vocab_size, ")"));
    }
  }
  if (r.priority != 0 && !info.priority_scheduling) {
    bad_param("priority", "'priority' needs the server started with --scheduling-policy priority");
  }
  return out;
}

// Per-stream state kept across calls of the chunked content provider.
struct StreamState {
  std::shared_ptr<Job> job;
  ResponseMeta meta;
  std::vector<ChoiceResult> choices;  // only counters/offsets are used while streaming
  std::vector<std::string> echo;      // per choice
  bool started = false;
  bool finished = false;
  std::string stop_suffix;  // include_stop_str_in_output
  bool include_stop = false;
  Clock::time_point last_write = Clock::now();
  std::optional<ToolCallStream> tools;  // chat with tool calls parsed
};

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

// SSE text for one event of a stream.
std::string render_event(StreamState& st, const tokenizer::Tokenizer& tok, const JobEvent& e) {
  ChoiceResult& c = st.choices[static_cast<size_t>(e.choice)];
  const auto& d = e.delta;
  std::string text = d.text;
  if (d.finish_reason != engine::FinishReason::none && st.include_stop) text += d.stop;
  Json logprobs;
  if (st.meta.logprobs && !d.token_ids.empty()) {
    logprobs = logprobs_json(st.meta, tok, d.token_ids, d.logprobs, c.text_offset);
  }
  const bool final = d.finish_reason != engine::FinishReason::none;
  // Nothing to say: tokens without text yet (a character still incomplete, a possible stop
  // string or tool-call markup held back) and no logprobs asked for.
  const auto silent = [&](bool nothing_new) {
    return nothing_new && logprobs.is_null() && !final &&
           !(st.meta.return_token_ids && !d.token_ids.empty());
  };
  if (st.meta.api == Api::chat) {
    Json delta = Json::object();
    if (st.tools) {
      delta = st.tools->delta(e.choice, text, final);
    } else if (!text.empty()) {
      delta["content"] = text;
    }
    if (silent(delta.empty())) return {};
    Json chunk = chat_chunk(st.meta, e.choice, std::move(delta), std::move(logprobs),
                            d.finish_reason, d.token_ids);
    // As vLLM: a choice that made tool calls finishes with "tool_calls".
    if (final && st.tools && st.tools->made_calls(e.choice)) {
      chunk["choices"][0]["finish_reason"] = "tool_calls";
    }
    return sse_event(chunk);
  }
  if (silent(text.empty())) return {};
  return sse_event(
      completion_chunk(st.meta, e.choice, text, std::move(logprobs), d.finish_reason, d.token_ids));
}

// The first chunks of a stream: the assistant role (chat) or the echoed prompt (completions).
std::string opening(const StreamState& st) {
  std::string out;
  for (size_t i = 0; i < st.choices.size(); ++i) {
    if (st.meta.api == Api::chat) {
      Json delta;
      delta["role"] = "assistant";
      delta["content"] = "";
      out += sse_event(chat_chunk(st.meta, static_cast<int64_t>(i), std::move(delta), Json(),
                                  engine::FinishReason::none));
    } else if (!st.echo[i].empty()) {
      out += sse_event(completion_chunk(st.meta, static_cast<int64_t>(i), st.echo[i], Json(),
                                        engine::FinishReason::none));
    }
  }
  return out;
}

}  // namespace

void ApiServer::Impl::handle_generation(Api api, const httplib::Request& req,
                                        httplib::Response& res) {
  const auto arrival = Clock::now();
  const auto body = parse_json_body(req.body);
  GenerationRequest r = api == Api::chat ? parse_chat_request(body, info.defaults)
                                         : parse_completion_request(body, info.defaults);
  if (r.logprobs && r.top_logprobs > info.max_logprobs) {
    bad_param(api == Api::chat ? "top_logprobs" : "logprobs",
              str_cat("Requested ", r.top_logprobs, " logprobs, more than this server's maximum ",
                      info.max_logprobs, " (--max-logprobs)"));
  }
  if (!r.model.empty() && r.model != info.name) {
    throw ApiError(404, str_cat("The model `", r.model, "` does not exist."), "model",
                   "model_not_found");
  }
  if (!r.ignored_fields.empty()) {
    std::string names;
    for (const auto& f : r.ignored_fields) names += (names.empty() ? "" : ", ") + f;
    log::warn("request fields ignored (unknown): ", names);
  }
  Prepared prepared = prepare(*this, r);
  // Tool calls are parsed for "auto" with tools, when the model's markup is known.
  const bool parse_tools = api == Api::chat && tool_family != toolcall::Family::none &&
                           r.tools.is_array() && !r.tools.empty() &&
                           r.tool_choice == ToolChoice::automatic;
  const auto num_prompts = static_cast<int64_t>(prepared.prompt_ids.size());

  // Admission: count this request's prompts as not started; refuse when the queue is full.
  const int64_t before = shared->not_started.fetch_add(num_prompts);
  auto job =
      std::make_shared<Job>(*client, shared, prepared.prompt_ids.size(), r.params.n, arrival);
  if (options.max_waiting_requests > 0 && before >= options.max_waiting_requests) {
    res.set_header("Retry-After", "1");
    throw ApiError(503,
                   str_cat("the server is overloaded: ", before,
                           " requests are waiting (--max-waiting-requests ",
                           options.max_waiting_requests, "); retry later"),
                   "", "overloaded");
  }
  std::vector<std::vector<int32_t>> prompt_copies;
  if (r.return_token_ids) prompt_copies = prepared.prompt_ids;
  try {
    for (size_t i = 0; i < prepared.prompt_ids.size(); ++i) {
      job->submit(i, std::move(prepared.prompt_ids[i]), prepared.params[i], r.priority);
    }
  } catch (const ApiError&) {
    job->abort();
    throw;
  } catch (const Error& e) {
    job->abort();
    throw ApiError(state.load() == ServerState::draining ? 503 : 400, e.what(),
                   api == Api::chat ? "messages" : "prompt");
  }
  add_job(job);

  ResponseMeta meta;
  meta.api = api;
  meta.id = make_response_id(api);
  meta.created = static_cast<int64_t>(std::time(nullptr));
  meta.model = info.name;
  meta.logprobs = r.logprobs;
  meta.top_logprobs = r.top_logprobs;
  meta.include_usage = r.include_usage;
  meta.return_token_ids = r.return_token_ids;
  const int64_t n = r.params.n;
  std::vector<std::string> echo;
  for (const auto& e : prepared.echo) echo.insert(echo.end(), static_cast<size_t>(n), e);

  if (!r.stream) {
    // Deregisters however this path ends (the response is built after the job finished).
    struct Registration {
      ApiServer::Impl& server;
      std::shared_ptr<Job> job;
      ~Registration() { server.remove_job(job); }
    } registration{*this, job};
    std::vector<ChoiceResult> choices(echo.size());
    for (size_t i = 0; i < choices.size(); ++i) {
      choices[i].text = echo[i];
      choices[i].text_offset = echo[i].size();
      if (r.return_token_ids) {
        choices[i].prompt_token_ids = prompt_copies[i / static_cast<size_t>(n)];
      }
    }
    std::vector<JobEvent> events;
    while (!job->finished()) {
      events.clear();
      job->wait_events(events, kPollInterval);
      for (const auto& e : events) {
        accumulate(choices[static_cast<size_t>(e.choice)], e.delta, r.include_stop_str_in_output);
      }
    }
    events.clear();
    job->wait_events(events, std::chrono::milliseconds(0));
    for (const auto& e : events) {
      accumulate(choices[static_cast<size_t>(e.choice)], e.delta, r.include_stop_str_in_output);
    }
    if (const auto error = job->error(); !error.empty()) {
      throw ApiError(500, str_cat("the engine failed: ", error));
    }
    // Offsets restart at the echo prefix: response_json recomputes them from there.
    for (size_t i = 0; i < choices.size(); ++i) choices[i].text_offset = echo[i].size();
    if (parse_tools) {
      for (auto& c : choices) parse_choice_tools(c, tool_family, r.tools, r.parallel_tool_calls);
    }
    const Usage usage{job->prompt_tokens(), job->completion_tokens()};
    res.set_content(dump_json(response_json(meta, *tokenizer, choices, usage)), "application/json");
    return;
  }

  auto st = std::make_shared<StreamState>();
  st->job = job;
  st->meta = meta;
  st->choices.resize(echo.size());
  for (size_t i = 0; i < echo.size(); ++i) st->choices[i].text_offset = echo[i].size();
  st->echo = std::move(echo);
  st->include_stop = r.include_stop_str_in_output;
  if (parse_tools)
    st->tools.emplace(tool_family, r.tools, st->choices.size(), r.parallel_tool_calls);
  const tokenizer::Tokenizer* tok = tokenizer;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, tok](size_t, httplib::DataSink& sink) -> bool {
        const auto write = [&](const std::string& text) {
          if (text.empty()) return true;
          st->last_write = Clock::now();
          return sink.write(text.data(), text.size());
        };
        if (!st->started) {
          st->started = true;
          return write(opening(*st));
        }
        std::vector<JobEvent> events;
        if (!st->job->wait_events(events, kPollInterval) && !st->job->finished()) {
          // Nothing new: a heartbeat comment now and then tells whether the client is there.
          if (Clock::now() - st->last_write >= kHeartbeat) return write(": keep-alive\n\n");
          return true;
        }
        std::string out;
        for (const auto& e : events) out += render_event(*st, *tok, e);
        if (st->job->finished()) {
          // Outputs delivered after the final one cannot exist, but drain any racing in.
          events.clear();
          st->job->wait_events(events, std::chrono::milliseconds(0));
          for (const auto& e : events) out += render_event(*st, *tok, e);
          if (const auto error = st->job->error(); !error.empty()) {
            out += sse_event(ApiError(500, str_cat("the engine failed: ", error)).to_json());
          } else if (st->meta.include_usage) {
            out += sse_event(
                usage_chunk(st->meta, {st->job->prompt_tokens(), st->job->completion_tokens()}));
          }
          out += "data: [DONE]\n\n";
          if (!write(out)) return false;
          st->finished = true;
          sink.done();
          return true;
        }
        return write(out);
      },
      [this, st](bool success) {
        // The client left (or the write failed): stop generating for it.
        if (!success || !st->finished) st->job->abort();
        remove_job(st->job);
      });
}

}  // namespace deepinfer::server
