// POST /v1/completions and /v1/chat/completions: request -> prompts -> admission -> engine;
// generation_response.cpp answers as the job runs.
#include <chrono>
#include <ctime>

#include "core/log.h"
#include "server/chat_prompt.h"
#include "server/generation_response.h"
#include "server/responses.h"
#include "server/server_impl.h"

namespace deepinfer::server {

namespace {

using Clock = std::chrono::steady_clock;

struct Prepared {
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> echo;  // per prompt: text prepended to every choice (echo)
  std::vector<engine::SamplingParams> params;
};

// A prompt text too long to fit max_model_len tokens whatever it holds is refused before it
// is tokenized: tokenizing costs about ten times the text in memory.
void check_prompt_bytes(const ModelInfo& info, size_t bytes, const char* param) {
  if (info.max_prompt_bytes <= 0 || static_cast<int64_t>(bytes) <= info.max_prompt_bytes) return;
  throw ApiError(
      400,
      str_cat("This model's maximum context length is ", info.max_model_len,
              " tokens. However, the ", param, " is ", bytes,
              " bytes long, more than any text of that many tokens (at most ",
              info.max_prompt_bytes, " bytes). Please reduce the length of the ", param, "."),
      param, "context_length_exceeded");
}

// Tokenizes within the tokenizer's text budget for this prompt, tightened to the longest text
// that could still fit max_model_len tokens: a tokenizer.json that expands text (a Replace
// normalizer) costs at most that, and the request gets a 400 naming the budget.
std::vector<int32_t> encode_prompt(const ModelInfo& info, const tokenizer::Tokenizer& tok,
                                   const std::string& text, bool add_special_tokens,
                                   const char* param) {
  auto budget = tokenizer::TextBudget::for_input(text.size());
  if (info.max_prompt_bytes > 0)
    budget = budget.at_most(static_cast<size_t>(info.max_prompt_bytes));
  try {
    return tok.encode(text, add_special_tokens, budget);
  } catch (const tokenizer::TextBudgetExceeded& e) {
    bad_param(param, str_cat("'", param, "' cannot be tokenized: ", e.what()));
  }
}

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
    const std::string text = render_chat_prompt(*chat, r, info.bos_token, info.eos_token);
    check_prompt_bytes(info, text.size(), param);
    // The rendered prompt carries its own special tokens.
    out.prompt_ids.push_back(encode_prompt(info, tok, text, /*add_special_tokens=*/false, param));
    out.echo.emplace_back();
  } else {
    for (const Prompt& p : r.prompts) {
      if (p.is_text) check_prompt_bytes(info, p.text.size(), param);
      out.prompt_ids.push_back(p.is_text ? encode_prompt(info, tok, p.text, true, param) : p.ids);
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

}  // namespace

void ApiServer::Impl::handle_generation(Api api, http::Request&& req, const Reply& reply) {
  const auto arrival = Clock::now();
  GenerationRequest r;
  {
    // Each copy of a large body is freed as soon as the next one exists: the text once
    // parsed, the parse once read into the request.
    auto body = parse_json_body(std::exchange(req.body, {}));
    r = api == Api::chat ? parse_chat_request(body, info.defaults)
                         : parse_completion_request(body, info.defaults);
  }
  if (r.logprobs && r.top_logprobs > info.max_logprobs) {
    bad_param(api == Api::chat ? "top_logprobs" : "logprobs",
              str_cat("Requested ", r.top_logprobs, " logprobs, more than this server's maximum ",
                      info.max_logprobs, " (--max-logprobs)"));
  }
  if (r.prompt_logprobs && *r.prompt_logprobs > info.max_logprobs) {
    bad_param("prompt_logprobs", str_cat("Requested ", *r.prompt_logprobs,
                                         " prompt logprobs, more than this server's maximum ",
                                         info.max_logprobs, " (--max-logprobs)"));
  }
  if (!r.model.empty() && r.model != info.name) {
    throw ApiError(404, str_cat("The model `", r.model, "` does not exist."), "model",
                   "model_not_found");
  }
  if (!r.ignored_fields.empty()) log::warn(ignored_fields_summary(r.ignored_fields));
  Prepared prepared = prepare(*this, r);
  const auto num_prompts = static_cast<int64_t>(prepared.prompt_ids.size());
  std::vector<int64_t> lengths;
  int64_t tokens = 0;
  for (const auto& ids : prepared.prompt_ids) {
    lengths.push_back(static_cast<int64_t>(ids.size()));
    tokens += lengths.back();
  }

  // Admission: count this request's prompts as not started; refuse when the queue is full.
  // The job gives the counts back however it ends.
  const int64_t waiting = shared->not_started.fetch_add(num_prompts);
  const int64_t waiting_tokens = shared->not_started_tokens.fetch_add(tokens);
  auto job = std::make_shared<Job>(*client, shared, lengths, r.params.n, arrival);
  const auto& limits = admission;
  if (limits.max_waiting_requests > 0 && waiting >= limits.max_waiting_requests) {
    throw ApiError(503,
                   str_cat("the server is overloaded: ", waiting,
                           " requests are waiting for their first token (--max-waiting-requests ",
                           limits.max_waiting_requests, "); retry later"),
                   "", "overloaded");
  }
  if (limits.max_waiting_tokens > 0 && waiting > 0 &&
      waiting_tokens + tokens > limits.max_waiting_tokens) {
    throw ApiError(503,
                   str_cat("the server is overloaded: ", waiting_tokens,
                           " prompt tokens are waiting and this request adds ", tokens,
                           " (--max-waiting-tokens ", limits.max_waiting_tokens, "); retry later"),
                   "", "overloaded");
  }
  ResponsePlan plan;
  plan.n = r.params.n;
  for (const auto& echo : prepared.echo) plan.echo.insert(plan.echo.end(), plan.n, echo);
  plan.echo_logprobs = r.echo_logprobs();
  plan.prompt_logprobs = r.prompt_logprobs;
  if (r.return_token_ids || plan.echo_logprobs || plan.prompt_logprobs) {
    plan.prompt_ids = prepared.prompt_ids;
  }
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

  ResponseMeta& meta = plan.meta;
  meta.api = api;
  meta.id = make_response_id(api);
  meta.created = static_cast<int64_t>(std::time(nullptr));
  meta.model = info.name;
  meta.logprobs = r.logprobs;
  meta.top_logprobs = r.top_logprobs;
  meta.include_usage = r.include_usage;
  meta.return_token_ids = r.return_token_ids;
  plan.include_stop = r.include_stop_str_in_output;
  plan.stream = r.stream;
  // Tool calls are parsed for "auto" with tools, when the model's markup is known.
  if (api == Api::chat && tool_family != toolcall::Family::none && r.tools.is_array() &&
      !r.tools.empty() && r.tool_choice == ToolChoice::automatic) {
    plan.tool_family = tool_family;
    plan.tools = r.tools;
    plan.parallel_tool_calls = r.parallel_tool_calls;
  }
  start_generation_response(*this, std::move(job), reply, std::move(plan));
}

}  // namespace deepinfer::server
