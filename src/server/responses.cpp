#include "server/responses.h"

#include <random>

namespace deepinfer::server {

namespace {

// A token's text (raw bytes; may be part of a UTF-8 character).
std::string token_text(const tokenizer::Tokenizer& tok, int32_t id) {
  const int32_t ids[] = {id};
  return tok.decode(ids, /*skip_special_tokens=*/false);
}

Json byte_list(const std::string& text) {
  Json out = Json::array();
  for (const unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

Json choice_base(int64_t index) {
  Json c;
  c["index"] = index;
  return c;
}

Json envelope(const ResponseMeta& meta, const char* object) {
  Json out;
  out["id"] = meta.id;
  out["object"] = object;
  out["created"] = meta.created;
  out["model"] = meta.model;
  return out;
}

Json empty_completion_logprobs() {
  Json out;
  out["tokens"] = Json::array();
  out["token_logprobs"] = Json::array();
  out["top_logprobs"] = Json::array();
  out["text_offset"] = Json::array();
  return out;
}

// One token of a completions logprobs object; `logprobs` null: no logprob (the first echoed
// prompt token).
void push_completion_token(Json& out, const ResponseMeta& meta, const tokenizer::Tokenizer& tok,
                           int32_t id, const engine::TokenLogprobs* logprobs, size_t& text_offset) {
  const std::string text = token_text(tok, id);
  out["tokens"].push_back(text);
  out["text_offset"].push_back(text_offset);
  text_offset += text.size();
  if (logprobs == nullptr) {
    out["token_logprobs"].push_back(nullptr);
    out["top_logprobs"].push_back(nullptr);
    return;
  }
  out["token_logprobs"].push_back(logprobs->chosen);
  // OpenAI: the N most likely tokens plus the sampled one (so up to N + 1 entries).
  Json top = Json::object();
  for (int64_t k = 0; k < meta.top_logprobs && k < static_cast<int64_t>(logprobs->top.size());
       ++k) {
    const auto& [alt, lp] = logprobs->top[static_cast<size_t>(k)];
    // Ids that decode alike share a key; the first (most likely) one keeps it.
    const std::string key = token_text(tok, alt);
    if (!top.contains(key)) top[key] = lp;
  }
  if (!top.contains(text)) top[text] = logprobs->chosen;
  out["top_logprobs"].push_back(std::move(top));
}

Json vllm_logprob(const tokenizer::Tokenizer& tok, int32_t id, float logprob, int64_t rank) {
  Json entry;
  entry["logprob"] = logprob;
  entry["rank"] = rank;
  entry["decoded_token"] = token_text(tok, id);
  return entry;
}

}  // namespace

Json usage_json(const Usage& usage) {
  Json out;
  out["prompt_tokens"] = usage.prompt_tokens;
  out["completion_tokens"] = usage.completion_tokens;
  out["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  return out;
}

Json finish_reason_json(engine::FinishReason reason) {
  if (reason == engine::FinishReason::none) return Json();
  return engine::finish_reason_name(reason);
}

Json logprobs_json(const ResponseMeta& meta, const tokenizer::Tokenizer& tok,
                   const std::vector<int32_t>& ids,
                   const std::vector<engine::TokenLogprobs>& logprobs, size_t& text_offset) {
  const size_t count = std::min(ids.size(), logprobs.size());
  if (meta.api == Api::chat) {
    Json content = Json::array();
    for (size_t i = 0; i < count; ++i) {
      const std::string text = token_text(tok, ids[i]);
      Json entry;
      entry["token"] = text;
      entry["logprob"] = logprobs[i].chosen;
      entry["bytes"] = byte_list(text);
      Json top = Json::array();
      for (int64_t k = 0; k < meta.top_logprobs && k < static_cast<int64_t>(logprobs[i].top.size());
           ++k) {
        const auto& [id, lp] = logprobs[i].top[static_cast<size_t>(k)];
        const std::string alt = token_text(tok, id);
        Json t;
        t["token"] = alt;
        t["logprob"] = lp;
        t["bytes"] = byte_list(alt);
        top.push_back(std::move(t));
      }
      entry["top_logprobs"] = std::move(top);
      content.push_back(std::move(entry));
    }
    Json out;
    out["content"] = std::move(content);
    return out;
  }
  Json out = empty_completion_logprobs();
  for (size_t i = 0; i < count; ++i) {
    push_completion_token(out, meta, tok, ids[i], &logprobs[i], text_offset);
  }
  return out;
}

Json echo_logprobs_json(const ResponseMeta& meta, const tokenizer::Tokenizer& tok,
                        std::span<const int32_t> prompt_ids,
                        const std::vector<engine::TokenLogprobs>& logprobs, size_t& text_offset) {
  Json out = empty_completion_logprobs();
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    const engine::TokenLogprobs* lp =
        i >= 1 && i - 1 < logprobs.size() ? &logprobs[i - 1] : nullptr;
    push_completion_token(out, meta, tok, prompt_ids[i], lp, text_offset);
  }
  return out;
}

void append_logprobs(Json& into, const Json& more) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    Json& list = into[key];
    if (!list.is_array()) list = Json::array();
    for (const Json& item : more.at(key)) list.push_back(item);
  }
}

Json prompt_logprobs_json(const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt_ids,
                          const std::vector<engine::TokenLogprobs>& logprobs, int64_t top_n) {
  Json out = Json::array();
  if (prompt_ids.empty()) return out;
  out.push_back(nullptr);
  for (size_t i = 1; i < prompt_ids.size(); ++i) {
    if (i - 1 >= logprobs.size()) {
      out.push_back(nullptr);
      continue;
    }
    const engine::TokenLogprobs& lp = logprobs[i - 1];
    Json entry = Json::object();
    entry[std::to_string(prompt_ids[i])] =
        vllm_logprob(tok, prompt_ids[i], lp.chosen, lp.chosen_rank);
    for (int64_t k = 0; k < top_n && k < static_cast<int64_t>(lp.top.size()); ++k) {
      const auto& [id, value] = lp.top[static_cast<size_t>(k)];
      const std::string key = std::to_string(id);
      if (!entry.contains(key)) entry[key] = vllm_logprob(tok, id, value, k + 1);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

Json response_json(const ResponseMeta& meta, const tokenizer::Tokenizer& tok,
                   const std::vector<ChoiceResult>& choices, const Usage& usage) {
  const bool chat = meta.api == Api::chat;
  Json out = envelope(meta, chat ? "chat.completion" : "text_completion");
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    Json choice = choice_base(static_cast<int64_t>(i));
    Json logprobs;
    if (meta.logprobs && !chat && !c.echo_token_ids.empty()) {
      // Offsets count from the start of the echoed prompt's token strings.
      size_t offset = 0;
      logprobs = echo_logprobs_json(meta, tok, c.echo_token_ids, c.echo_logprobs, offset);
      append_logprobs(logprobs, logprobs_json(meta, tok, c.token_ids, c.logprobs, offset));
    } else if (meta.logprobs) {
      size_t offset = c.text_offset;
      logprobs = logprobs_json(meta, tok, c.token_ids, c.logprobs, offset);
    }
    if (meta.return_token_ids && !chat) choice["prompt_token_ids"] = c.prompt_token_ids;
    if (chat) {
      Json message;
      message["role"] = "assistant";
      message["content"] = c.tools_parsed && c.text.empty() ? Json() : Json(c.text);
      if (!c.tool_calls.empty()) {
        Json calls = Json::array();
        for (size_t k = 0; k < c.tool_calls.size(); ++k) {
          calls.push_back(tool_call_json(c.tool_calls[k], c.tool_call_ids.at(k)));
        }
        message["tool_calls"] = std::move(calls);
      }
      choice["message"] = std::move(message);
      choice["logprobs"] = std::move(logprobs);
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = std::move(logprobs);
      if (!c.prompt_logprobs.is_null()) choice["prompt_logprobs"] = c.prompt_logprobs;
    }
    // As vLLM: a choice that made tool calls finishes with "tool_calls".
    choice["finish_reason"] =
        c.tool_calls.empty() ? finish_reason_json(c.finish_reason) : Json("tool_calls");
    if (meta.return_token_ids) choice["token_ids"] = c.token_ids;
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  if (meta.return_token_ids && chat && !choices.empty()) {
    out["prompt_token_ids"] = choices.front().prompt_token_ids;
  }
  if (chat && !choices.empty() && !choices.front().prompt_logprobs.is_null()) {
    out["prompt_logprobs"] = choices.front().prompt_logprobs;
  }
  out["usage"] = usage_json(usage);
  return out;
}

Json completion_chunk(const ResponseMeta& meta, int64_t index, const std::string& text,
                      Json logprobs, engine::FinishReason finish,
                      const std::vector<int32_t>& token_ids) {
  Json out = envelope(meta, "text_completion");
  Json choice = choice_base(index);
  choice["text"] = text;
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason_json(finish);
  if (meta.return_token_ids) choice["token_ids"] = token_ids;
  out["choices"] = Json::array({std::move(choice)});
  if (meta.include_usage) out["usage"] = nullptr;
  return out;
}

Json chat_chunk(const ResponseMeta& meta, int64_t index, Json delta, Json logprobs,
                engine::FinishReason finish, const std::vector<int32_t>& token_ids) {
  Json out = envelope(meta, "chat.completion.chunk");
  Json choice = choice_base(index);
  choice["delta"] = std::move(delta);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason_json(finish);
  if (meta.return_token_ids) choice["token_ids"] = token_ids;
  out["choices"] = Json::array({std::move(choice)});
  if (meta.include_usage) out["usage"] = nullptr;
  return out;
}

Json usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  Json out = envelope(meta, meta.api == Api::chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = Json::array();
  out["usage"] = usage_json(usage);
  return out;
}

std::string dump_json(const Json& payload) {
  return payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_event(const Json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

Json tool_call_json(const toolcall::ToolCall& call, const std::string& id, int64_t index) {
  Json out;
  if (index >= 0) out["index"] = index;
  out["id"] = id;
  out["type"] = "function";
  Json fn;
  fn["name"] = call.name;
  fn["arguments"] = call.arguments;
  out["function"] = std::move(fn);
  return out;
}

std::string make_tool_call_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kAlnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlnum) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[pick(rng)];
  return id;
}

std::string make_response_id(Api api) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = api == Api::chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 2; ++i) {
    uint64_t bits = rng();
    for (int k = 0; k < 16; ++k, bits >>= 4) id += kHex[bits & 15];
  }
  return id;
}

}  // namespace deepinfer::server
