#include "server/chat_prompt.h"

#include "server/errors.h"
#include "server/tool_request.h"

namespace deepinfer::server {

std::string render_chat_prompt(const tokenizer::ChatTemplate& chat, const GenerationRequest& r,
                               const std::string& bos_token, const std::string& eos_token) {
  const auto render = [&](const nlohmann::ordered_json& messages) {
    return chat.render(messages, r.tools, r.add_generation_prompt, bos_token, eos_token,
                       r.chat_template_kwargs);
  };
  const auto mapped = with_mapping_arguments(r.messages);
  try {
    return render(mapped ? *mapped : r.messages);
  } catch (const Error& e) {
    if (mapped) {
      try {
        return render(r.messages);
      } catch (const Error&) {
      }
    }
    throw ApiError(400, str_cat("the chat template could not render these messages: ", e.what()),
                   "messages");
  }
}

}  // namespace deepinfer::server
