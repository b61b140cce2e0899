#pragma once
// The answer to one generation request while its job runs: a stream of SSE chunks, or one JSON
// body when the job has finished. Pumped (response_pump.h) whenever the job has news; the HTTP
// layer closing the connection aborts the job.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/responses.h"
#include "server/server_impl.h"

namespace deepinfer::server {

// What the response needs to know besides the job's events.
struct ResponsePlan {
  ResponseMeta meta;
  std::vector<std::string> echo;  // per choice: text prepended to it (echo)
  int64_t n = 1;                  // choices per prompt
  // Per prompt: its ids, kept when a response shows them (return_token_ids, echo + logprobs,
  // prompt_logprobs); else empty.
  std::vector<std::vector<int32_t>> prompt_ids;
  bool echo_logprobs = false;              // completions echo + logprobs
  std::optional<int64_t> prompt_logprobs;  // vLLM's prompt_logprobs = N
  bool include_stop = false;               // include_stop_str_in_output
  bool stream = false;
  // Chat with tool calls parsed: the family and the request's tools.
  toolcall::Family tool_family = toolcall::Family::none;
  nlohmann::ordered_json tools;
  bool parallel_tool_calls = true;
};

// Registers the response with the server, starts the stream (streams), and wires the job's
// news and the connection's end to it. The job's prompts are already submitted.
std::shared_ptr<GenerationResponse> start_generation_response(ApiServer::Impl& server,
                                                              std::shared_ptr<Job> job, Reply reply,
                                                              ResponsePlan plan);

}  // namespace deepinfer::server
