#pragma once
// Response bodies and stream chunks exactly as the OpenAI API shapes them: text_completion /
// chat.completion objects, text_completion / chat.completion.chunk SSE chunks, usage, and
// logprobs in the completions and the chat formats.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_output.h"
#include "server/protocol.h"
#include "tokenizer/tokenizer.h"
#include "toolcall/tool_parser.h"

namespace deepinfer::server {

using Json = nlohmann::ordered_json;

// Identity shared by a response and all its chunks.
struct ResponseMeta {
  Api api = Api::completions;
  std::string id;  // cmpl-... / chatcmpl-...
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
  int64_t top_logprobs = 0;
  bool include_usage = false;  // streams: "usage": null on chunks, a usage chunk at the end
  bool return_token_ids = false;
};

// A whole choice, accumulated from its deltas.
struct ChoiceResult {
  std::string text;  // echo prefix included
  std::vector<int32_t> token_ids;
  std::vector<engine::TokenLogprobs> logprobs;
  engine::FinishReason finish_reason = engine::FinishReason::none;
  std::string stop;
  size_t text_offset = 0;                 // completions logprobs: running text_offset
  std::vector<int32_t> prompt_token_ids;  // return_token_ids
  // Chat with a tool-call parser: `text` is then the content without the calls (null in the
  // message when empty) and finish_reason reads "tool_calls" when there are calls.
  bool tools_parsed = false;
  std::vector<toolcall::ToolCall> tool_calls;
  std::vector<std::string> tool_call_ids;  // one per call
  // Completions echo + logprobs: the prompt's ids and engine prompt logprobs (entry i for
  // prompt token i + 1); response_json lists them before the generated tokens.
  std::vector<int32_t> echo_token_ids;
  std::vector<engine::TokenLogprobs> echo_logprobs;
  // vLLM's prompt_logprobs (prompt_logprobs_json), shown when not null: in the choice
  // (completions) or, from the first choice, at the top of the response (chat), as vLLM does.
  Json prompt_logprobs;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};
Json usage_json(const Usage& usage);

// "stop" | "length" | "abort" ("abort" is vLLM's word for a request cut short).
Json finish_reason_json(engine::FinishReason reason);

// Logprobs of `ids` in the endpoint's format. Completions: {"tokens", "token_logprobs",
// "top_logprobs", "text_offset"} with offsets counted from `text_offset` (advanced); chat:
// {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
Json logprobs_json(const ResponseMeta& meta, const tokenizer::Tokenizer& tok,
                   const std::vector<int32_t>& ids,
                   const std::vector<engine::TokenLogprobs>& logprobs, size_t& text_offset);

// vLLM's prompt_logprobs: one entry per prompt token, null for the first, then
// {"<id>": {"logprob", "rank", "decoded_token"}} holding the prompt token (its vocabulary rank)
// and the top-N (ranks 1..N). `logprobs`: the engine's, entry i for prompt token i + 1.
Json prompt_logprobs_json(const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt_ids,
                          const std::vector<engine::TokenLogprobs>& logprobs, int64_t top_n);

// Completions echo + logprobs: the echoed prompt's part of the logprobs object, in the shape of
// logprobs_json (null logprob and null top_logprobs for the first token), offsets counted from
// `text_offset` (advanced). Append the generated tokens' part with append_logprobs.
Json echo_logprobs_json(const ResponseMeta& meta, const tokenizer::Tokenizer& tok,
                        std::span<const int32_t> prompt_ids,
                        const std::vector<engine::TokenLogprobs>& logprobs, size_t& text_offset);

// Appends the tokens / token_logprobs / top_logprobs / text_offset of `more` (a completions
// logprobs object) to `into`.
void append_logprobs(Json& into, const Json& more);

// Non-streamed response.
Json response_json(const ResponseMeta& meta, const tokenizer::Tokenizer& tok,
                   const std::vector<ChoiceResult>& choices, const Usage& usage);

// One stream chunk for choice `index`. Completions: `text`; chat: `delta` is the delta
// object ({"role": ...} / {"content": ...} / {}). `logprobs` null when not requested.
// `token_ids`: the delta's ids, shown only with return_token_ids.
Json completion_chunk(const ResponseMeta& meta, int64_t index, const std::string& text,
                      Json logprobs, engine::FinishReason finish,
                      const std::vector<int32_t>& token_ids = {});
Json chat_chunk(const ResponseMeta& meta, int64_t index, Json delta, Json logprobs,
                engine::FinishReason finish, const std::vector<int32_t>& token_ids = {});
Json usage_chunk(const ResponseMeta& meta, const Usage& usage);

// One entry of message.tool_calls: {"id", "type": "function", "function": {"name",
// "arguments"}}; stream deltas (`index` >= 0) start with "index".
Json tool_call_json(const toolcall::ToolCall& call, const std::string& id, int64_t index = -1);
// A fresh tool call id: "call_" and 24 random alphanumerics, as OpenAI's look.
std::string make_tool_call_id();

// "data: <json>\n\n" (invalid UTF-8 in strings becomes U+FFFD).
std::string sse_event(const Json& payload);
// JSON text for a response body (invalid UTF-8 replaced).
std::string dump_json(const Json& payload);

// A fresh response id with the endpoint's prefix.
std::string make_response_id(Api api);

}  // namespace deepinfer::server
