#pragma once
// The prompt text of a chat request: the model's chat template rendered with the request's
// messages, tools, add_generation_prompt and chat_template_kwargs (every key a template
// variable, e.g. {"enable_thinking": false} for Qwen3 / GLM, {"thinking": true} for
// DeepSeek-V3.1), as vLLM renders it.
#include <string>

#include "server/protocol.h"
#include "tokenizer/chat_template.h"

namespace deepinfer::server {

// Tool-call arguments go in as mappings (what transformers' templates expect); a template that
// concatenates them as strings (DeepSeek-V3, V3.1) fails on a mapping and gets them as the
// request sent them. Throws ApiError (400, param "messages") when the template cannot render.
std::string render_chat_prompt(const tokenizer::ChatTemplate& chat, const GenerationRequest& r,
                               const std::string& bos_token, const std::string& eos_token);

}  // namespace deepinfer::server
