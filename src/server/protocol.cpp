#include "server/protocol.h"

#include <algorithm>
#include <limits>
#include <set>

#include "server/request_fields.h"
#include "server/tool_request.h"

namespace deepinfer::server {

namespace {

using fields::Json;

// Engine requests one HTTP request may fan out to (prompts x n).
constexpr int64_t kMaxChoices = 256;

// Fields read by both endpoints.
const std::set<std::string> kCommonKeys = {
    "model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop",
    "presence_penalty", "frequency_penalty", "logit_bias", "user", "seed", "best_of",
    "response_format",
    // vLLM extensions.
    "top_k", "min_p", "repetition_penalty", "ignore_eos", "priority", "stop_token_ids",
    "min_tokens", "skip_special_tokens", "include_stop_str_in_output", "return_token_ids",
    "prompt_logprobs"};
// vLLM's structured-output fields: they would constrain the output, so until guided decoding
// exists they are refused rather than ignored (docs/API.md).
constexpr const char* kStructuredOutputKeys[] = {"guided_json",
                                                 "guided_regex",
                                                 "guided_choice",
                                                 "guided_grammar",
                                                 "guided_decoding_backend",
                                                 "guided_whitespace_pattern",
                                                 "structural_tag",
                                                 "structured_outputs"};
const std::set<std::string> kCompletionKeys = {"prompt", "suffix", "echo", "logprobs"};
const std::set<std::string> kChatKeys = {"messages",
                                         "max_completion_tokens",
                                         "logprobs",
                                         "top_logprobs",
                                         "tools",
                                         "tool_choice",
                                         "parallel_tool_calls",
                                         "metadata",
                                         "store",
                                         "service_tier",
                                         "chat_template_kwargs",
                                         "add_generation_prompt",
                                         "continue_final_message",
                                         "chat_template",
                                         "echo"};

void unsupported(const char* key, const std::string& why) {
  bad_param(key, str_cat("'", key, "' ", why));
}

void parse_sampling(const Json& body, const SamplingDefaults& d, GenerationRequest& r) {
  using namespace fields;
  auto& p = r.params;
  p.temperature = number(body, "temperature").value_or(d.temperature.value_or(1.0));
  check_range("temperature", p.temperature, 0.0, 2.0);
  p.top_p = number(body, "top_p").value_or(d.top_p.value_or(1.0));
  check_range("top_p", p.top_p, 0.0, 1.0, /*lo_open=*/true);
  p.top_k = integer(body, "top_k").value_or(d.top_k.value_or(0));
  check_range("top_k", static_cast<double>(p.top_k), -1.0, std::nullopt);
  p.min_p = number(body, "min_p").value_or(d.min_p.value_or(0.0));
  check_range("min_p", p.min_p, 0.0, 1.0);
  p.repetition_penalty =
      number(body, "repetition_penalty").value_or(d.repetition_penalty.value_or(1.0));
  check_range("repetition_penalty", p.repetition_penalty, 0.0, std::nullopt, true);
  p.presence_penalty = number(body, "presence_penalty").value_or(0.0);
  check_range("presence_penalty", p.presence_penalty, -2.0, 2.0);
  p.frequency_penalty = number(body, "frequency_penalty").value_or(0.0);
  check_range("frequency_penalty", p.frequency_penalty, -2.0, 2.0);
  if (const auto seed = integer(body, "seed")) p.seed = static_cast<uint64_t>(*seed);
  p.n = integer(body, "n").value_or(1);
  check_range("n", static_cast<double>(p.n), 1.0, 64.0);
  if (const auto best_of = integer(body, "best_of"); best_of && *best_of != p.n) {
    unsupported("best_of", "is not supported (only best_of equal to n)");
  }
  p.stop = stop_strings(body, "stop");
  for (int64_t id : id_list(body, "stop_token_ids")) {
    check_range("stop_token_ids", static_cast<double>(id), 0.0, std::nullopt);
    p.stop_token_ids.push_back(id);
  }
  p.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  r.priority = integer(body, "priority").value_or(0);
  r.include_stop_str_in_output = boolean(body, "include_stop_str_in_output").value_or(false);
  r.return_token_ids = boolean(body, "return_token_ids").value_or(false);
  if (integer(body, "min_tokens").value_or(0) != 0) unsupported("min_tokens", "is not supported");
  if (!boolean(body, "skip_special_tokens").value_or(true)) {
    unsupported("skip_special_tokens", "= false is not supported");
  }
  if (const Json* bias = find(body, "logit_bias")) {
    if (!bias->is_object()) bad_param("logit_bias", "'logit_bias' must be an object");
    if (!bias->empty()) unsupported("logit_bias", "is not supported");
  }
  for (const char* key : kStructuredOutputKeys) {
    if (find(body, key) != nullptr) {
      unsupported(key, "is not supported: deepinfer has no guided decoding (structured output)");
    }
  }
  if (const Json* format = find(body, "response_format")) {
    if (!format->is_object() || format->value("type", Json()) != "text") {
      unsupported("response_format",
                  "is not supported except {\"type\": \"text\"} (json_object and json_schema "
                  "need guided decoding, which deepinfer lacks)");
    }
  }
  (void)string(body, "user");  // type-checked, otherwise unused (as OpenAI's abuse monitoring)
  r.model = string(body, "model").value_or("");

  r.stream = boolean(body, "stream").value_or(false);
  if (const Json* options = find(body, "stream_options")) {
    if (!r.stream) {
      bad_param("stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    if (!options->is_object()) bad_param("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*options, "include_usage").value_or(false);
  }
}

// Completions accept max_tokens = 0 (score the prompt only: echo + logprobs, prompt_logprobs),
// as OpenAI's legacy endpoint did; chat needs at least one token.
void check_max_tokens(const GenerationRequest& r, const char* key) {
  const double least = r.api == Api::completions ? 0.0 : 1.0;
  if (r.max_tokens)
    fields::check_range(key, static_cast<double>(*r.max_tokens), least, std::nullopt);
}

void parse_prompt_logprobs(const Json& body, GenerationRequest& r) {
  const auto n = fields::integer(body, "prompt_logprobs");
  if (!n) return;
  if (*n == -1) unsupported("prompt_logprobs", "= -1 (the whole vocabulary) is not supported");
  fields::check_range("prompt_logprobs", static_cast<double>(*n), 0.0, 20.0);
  if (r.stream) {
    bad_param("prompt_logprobs", "'prompt_logprobs' is not available when 'stream' is true");
  }
  r.prompt_logprobs = *n;
}

std::vector<Prompt> parse_prompts(const Json& body) {
  const Json* value = fields::find(body, "prompt");
  if (value == nullptr) bad_param("prompt", "'prompt' is required");
  const auto token = [](const Json& item) -> std::optional<int32_t> {
    if (!item.is_number_integer()) return std::nullopt;
    const auto v = item.get<int64_t>();
    if (v < 0 || v > std::numeric_limits<int32_t>::max()) return std::nullopt;
    return static_cast<int32_t>(v);
  };
  const auto token_list = [&](const Json& list) {
    Prompt p;
    for (const Json& item : list) {
      const auto id = token(item);
      if (!id) {
        bad_param("prompt",
                  str_cat("'prompt' token ids must be non-negative integers, found ", item.dump()));
      }
      p.ids.push_back(*id);
    }
    if (p.ids.empty()) bad_param("prompt", "'prompt' must not be an empty token list");
    return p;
  };
  std::vector<Prompt> out;
  if (value->is_string()) {
    out.push_back({true, value->get<std::string>(), {}});
  } else if (value->is_array() && !value->empty()) {
    const Json& first = value->front();
    if (first.is_string()) {
      for (const Json& item : *value) {
        if (!item.is_string()) bad_param("prompt", "'prompt' mixes strings and other values");
        out.push_back({true, item.get<std::string>(), {}});
      }
    } else if (first.is_array()) {
      for (const Json& item : *value) {
        if (!item.is_array()) bad_param("prompt", "'prompt' mixes token lists and other values");
        out.push_back(token_list(item));
      }
    } else {
      out.push_back(token_list(*value));
    }
  } else {
    bad_param("prompt",
              "'prompt' must be a string, an array of strings, an array of token ids or an "
              "array of token id arrays, and not empty");
  }
  return out;
}

// Content parts ([{"type": "text", "text": ...}]) become one string (joined by newlines, as
// vLLM does for templates that expect string content).
Json normalize_messages(const Json& body) {
  const Json* messages = fields::find(body, "messages");
  if (messages == nullptr) bad_param("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) {
    bad_param("messages", "'messages' must be a non-empty array of message objects");
  }
  Json out = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string where = str_cat("messages[", i, "]");
    if (!m.is_object()) bad_param("messages", where + " must be an object");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      bad_param("messages", where + ".role must be a string");
    }
    Json copy = m;
    const auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      std::string text;
      for (const Json& part : *content) {
        if (!part.is_object() || part.value("type", Json()) != "text" || !part.contains("text") ||
            !part.at("text").is_string()) {
          bad_param("messages", where +
                                    ".content: only text parts ({\"type\": \"text\", \"text\": "
                                    "...}) are supported");
        }
        if (!text.empty()) text += "\n";
        text += part.at("text").get<std::string>();
      }
      copy["content"] = text;
    } else if (content != m.end() && !content->is_string() && !content->is_null()) {
      bad_param("messages", where + ".content must be a string, an array of text parts or null");
    }
    out.push_back(std::move(copy));
  }
  return out;
}

void finish(GenerationRequest& r, const Json& body, const std::set<std::string>& specific) {
  std::set<std::string> known = kCommonKeys;
  known.insert(specific.begin(), specific.end());
  known.insert(std::begin(kStructuredOutputKeys), std::end(kStructuredOutputKeys));
  r.ignored_fields = fields::unknown_keys(body, known);
  const auto prompts = std::max<int64_t>(1, static_cast<int64_t>(r.prompts.size()));
  if (prompts * r.params.n > kMaxChoices) {
    bad_param(r.api == Api::chat ? "n" : "prompt",
              str_cat("a request may ask for at most ", kMaxChoices,
                      " completions (prompts x n), got ", prompts * r.params.n));
  }
  r.params.logprobs = r.logprobs ? std::optional<int64_t>(r.top_logprobs) : std::nullopt;
  r.params.prompt_logprobs = r.prompt_logprobs;
  if (r.echo_logprobs()) {
    r.params.prompt_logprobs = std::max(r.prompt_logprobs.value_or(0), r.top_logprobs);
  }
}

void check_object(const Json& body) {
  if (!body.is_object()) bad_param("", "the request body must be a JSON object");
}

}  // namespace

GenerationRequest parse_completion_request(const nlohmann::ordered_json& body,
                                           const SamplingDefaults& defaults) {
  check_object(body);
  GenerationRequest r;
  r.api = Api::completions;
  r.prompts = parse_prompts(body);
  parse_sampling(body, defaults, r);
  r.max_tokens = fields::integer(body, "max_tokens");
  check_max_tokens(r, "max_tokens");
  r.echo = fields::boolean(body, "echo").value_or(false);
  if (fields::find(body, "suffix") != nullptr) unsupported("suffix", "is not supported");
  if (const auto logprobs = fields::integer(body, "logprobs")) {
    fields::check_range("logprobs", static_cast<double>(*logprobs), 0.0, 20.0);
    r.logprobs = true;
    r.top_logprobs = *logprobs;
  }
  parse_prompt_logprobs(body, r);
  finish(r, body, kCompletionKeys);
  return r;
}

GenerationRequest parse_chat_request(const nlohmann::ordered_json& body,
                                     const SamplingDefaults& defaults) {
  check_object(body);
  GenerationRequest r;
  r.api = Api::chat;
  r.messages = normalize_messages(body);
  parse_sampling(body, defaults, r);
  // max_completion_tokens supersedes the deprecated max_tokens (as in vLLM).
  const auto max_completion = fields::integer(body, "max_completion_tokens");
  r.max_tokens = max_completion ? max_completion : fields::integer(body, "max_tokens");
  check_max_tokens(r, max_completion ? "max_completion_tokens" : "max_tokens");

  r.logprobs = fields::boolean(body, "logprobs").value_or(false);
  if (const auto top = fields::integer(body, "top_logprobs")) {
    fields::check_range("top_logprobs", static_cast<double>(*top), 0.0, 20.0);
    if (*top > 0 && !r.logprobs) {
      bad_param("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    }
    r.top_logprobs = *top;
  }
  parse_tool_fields(body, r);
  if (const Json* kwargs = fields::find(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      bad_param("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    r.chat_template_kwargs = *kwargs;
  }
  r.add_generation_prompt = fields::boolean(body, "add_generation_prompt").value_or(true);
  if (fields::boolean(body, "continue_final_message").value_or(false)) {
    unsupported("continue_final_message", "is not supported");
  }
  if (fields::find(body, "chat_template") != nullptr) {
    unsupported("chat_template", "is not supported: the model's own template is used");
  }
  if (fields::boolean(body, "echo").value_or(false))
    unsupported("echo", "is not supported in chat");
  parse_prompt_logprobs(body, r);
  finish(r, body, kChatKeys);
  return r;
}

std::string ignored_fields_summary(const std::vector<std::string>& names) {
  constexpr size_t kNamesShown = 5;
  constexpr size_t kNameBytes = 40;
  std::string out = str_cat("request fields ignored (unknown): ", names.size(), " (");
  for (size_t i = 0; i < std::min(names.size(), kNamesShown); ++i) {
    if (i > 0) out += ", ";
    for (const char c : names[i].substr(0, kNameBytes)) {
      out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
    }
    if (names[i].size() > kNameBytes) out += "...";
  }
  if (names.size() > kNamesShown) out += ", ...";
  return out + ")";
}

int64_t resolve_max_tokens(const GenerationRequest& r, int64_t prompt_len, int64_t max_model_len,
                           const SamplingDefaults& defaults) {
  const bool chat = r.api == Api::chat;
  const char* param = chat ? "messages" : "prompt";
  const int64_t requested = r.max_tokens.value_or(1);
  // Compared without forming prompt_len + requested, which overflows for max_tokens near 2^63.
  if (requested > max_model_len - prompt_len) {
    // Both are >= 0 and below 2^63: their sum fits in 64 unsigned bits.
    const uint64_t total = static_cast<uint64_t>(prompt_len) + static_cast<uint64_t>(requested);
    throw ApiError(
        400,
        str_cat("This model's maximum context length is ", max_model_len,
                " tokens. However, you requested ", total, " tokens (", prompt_len, " in the ",
                chat ? "messages" : "prompt", ", ", requested,
                " in the completion). Please reduce the length of the ", param, " or completion."),
        param, "context_length_exceeded");
  }
  if (r.max_tokens) return *r.max_tokens;
  const int64_t room = max_model_len - prompt_len;
  if (!chat) return std::min<int64_t>(room, 16);
  return defaults.max_tokens ? std::min(room, std::max<int64_t>(1, *defaults.max_tokens)) : room;
}

SamplingDefaults sampling_defaults_from(const io::GenerationConfig& generation) {
  SamplingDefaults d;
  d.temperature = generation.temperature;
  d.top_p = generation.top_p;
  d.top_k = generation.top_k;
  d.repetition_penalty = generation.repetition_penalty;
  d.max_tokens = generation.max_new_tokens;
  const auto& raw = generation.raw;
  if (raw.is_object() && raw.contains("min_p") && raw.at("min_p").is_number()) {
    d.min_p = raw.at("min_p").get<double>();
  }
  return d;
}

}  // namespace deepinfer::server
