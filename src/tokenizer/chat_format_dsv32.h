#pragma once
// DeepSeek-V3.2's chat format. The model ships no Jinja template: its format is the Python
// encoder encoding/encoding_dsv32.py of the Hugging Face repository (encode_messages), which
// this renders byte for byte (goldens: tests/data/chat/goldens/deepseek-v3.2.json, made by
// tools/make_dsv32_chat_goldens.py with the reference encoder). A request reaches the encoder
// as vLLM's deepseek_v32 tokenizer mode hands it over (vllm/tokenizers/deepseek_v32.py):
//   - chat_template_kwargs "thinking" or "enable_thinking" (either truthy) selects "thinking"
//     mode, else "chat" mode;
//   - request tools become a leading {"role": "system", "tools": tools} message;
//   - earlier reasoning is dropped when the last message is a user's (drop_thinking).
// Messages are prepared as for the Jinja templates: keys whose value is null are dropped, an
// assistant's reasoning may come as reasoning_content, reasoning or thinking, and content may
// be a list of text parts (joined with "\n", vLLM's "string" content format). Tool-call
// arguments may be a JSON string or a mapping. The encoder has no add_generation_prompt: false
// leaves out the assistant opener it ends a final user turn (or tool-result block) with.
// Whatever the encoder rejects throws Error naming the problem.
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

// The name a TokenizerConfig gives this format (TokenizerConfig::chat_format).
inline constexpr const char* kDeepseekV32ChatFormat = "deepseek_v32";

std::string render_deepseek_v32_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json& kwargs);

// Whether a model's config.json describes DeepSeek-V3.2 (model_type "deepseek_v32" or
// architectures naming DeepseekV32ForCausalLM), the models that use this format.
bool is_deepseek_v32_config(const nlohmann::json& model_config);

}  // namespace deepinfer::tokenizer
