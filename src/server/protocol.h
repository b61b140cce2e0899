#pragma once
// OpenAI request bodies -> structs (strict types, named parameters in every error), and the
// rules that turn them into engine SamplingParams. docs/API.md lists every field.
//
// Unknown fields are ignored (as OpenAI and vLLM do) and reported in `ignored_fields` so the
// server can log them; known fields whose feature deepinfer lacks (logit_bias, suffix, forced
// tool calls, ...) are 400 errors when they would change the result, never silently dropped.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "server/errors.h"
#include "server/json_body.h"
#include "server/server.h"

namespace deepinfer::server {

enum class Api { completions, chat };

// tool_choice: "none" (tools reach the template, output is not parsed) or "auto" (tool calls in
// the output are parsed when the server has a tool-call parser for the model).
enum class ToolChoice { none, automatic };

struct Prompt {
  bool is_text = false;
  std::string text;          // the prompt as given (is_text)
  std::vector<int32_t> ids;  // the prompt as given (!is_text), later the encoded prompt
};

struct GenerationRequest {
  Api api = Api::completions;
  std::string model;  // "" when omitted (= the served model)

  std::vector<Prompt> prompts;  // completions: one per prompt of a batch; chat: empty
  bool echo = false;            // completions: prepend the prompt to the text

  nlohmann::ordered_json messages;  // chat: array of message objects (content made text)
  nlohmann::ordered_json tools;     // chat: null or array
  ToolChoice tool_choice = ToolChoice::automatic;
  bool parallel_tool_calls = true;  // false: only the first tool call is returned
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;

  engine::SamplingParams params;      // max_new_tokens is settled by resolve_max_tokens
  std::optional<int64_t> max_tokens;  // as requested
  int64_t priority = 0;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool include_stop_str_in_output = false;
  bool return_token_ids = false;  // vLLM extension: token ids in choices (and prompt ids)

  // Completions: logprobs = N; chat: logprobs = true with top_logprobs = N.
  bool logprobs = false;
  int64_t top_logprobs = 0;
  // vLLM's prompt_logprobs = N (both endpoints, not with stream): the response's
  // "prompt_logprobs" list (prompt_logprobs_json). params.prompt_logprobs also covers echo.
  std::optional<int64_t> prompt_logprobs;
  // Completions echo + logprobs: the logprobs object starts with the echoed prompt's tokens
  // (echo_logprobs_json); params.prompt_logprobs is then at least top_logprobs.
  bool echo_logprobs() const { return api == Api::completions && echo && logprobs; }

  std::vector<std::string> ignored_fields;
};

// Parse a request body (already JSON). Throws ApiError (400) naming the field at fault.
// `defaults` fill the sampling fields the request leaves out.
GenerationRequest parse_completion_request(const nlohmann::ordered_json& body,
                                           const SamplingDefaults& defaults);
GenerationRequest parse_chat_request(const nlohmann::ordered_json& body,
                                     const SamplingDefaults& defaults);

// One log line for the ignored fields: their count and the first few names, each cut short and
// with control characters replaced (a body may hold a thousand keys of any length).
std::string ignored_fields_summary(const std::vector<std::string>& names);

// max_new_tokens for a prompt of `prompt_len` tokens: the requested max_tokens when it fits
// in max_model_len (else 400 context_length_exceeded, as OpenAI words it), or when omitted the
// room left (completions: at most 16, OpenAI's default; chat: at most defaults.max_tokens).
int64_t resolve_max_tokens(const GenerationRequest& request, int64_t prompt_len,
                           int64_t max_model_len, const SamplingDefaults& defaults);

}  // namespace deepinfer::server
