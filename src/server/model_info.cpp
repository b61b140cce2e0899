#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "server/server.h"

namespace deepinfer::server {

ModelInfo model_info_from(const std::string& model_dir, const engine::Engine& engine,
                          const io::GenerationConfig& generation,
                          const tokenizer::Tokenizer& tokenizer, std::string name,
                          bool use_generation_defaults) {
  ModelInfo info;
  if (name.empty()) {
    auto path = std::filesystem::path(model_dir).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();  // "dir/" -> "dir"
    name = path.filename().string();
  }
  DI_CHECK(!name.empty(), "cannot derive a model name from '", model_dir,
           "': pass --served-model-name");
  info.name = std::move(name);
  info.root = model_dir;
  info.max_model_len = engine.config().max_model_len;
  info.vocab_size = engine.model().vocab_size();
  info.max_num_seqs = engine.config().max_num_seqs;
  info.kv_pool_tokens = engine.block_manager().stats().num_blocks * engine.config().block_size;
  info.max_prompt_bytes = prompt_byte_limit(tokenizer, info.max_model_len);
  info.priority_scheduling =
      engine.config().scheduling_policy == engine::SchedulingPolicy::priority;
  if (use_generation_defaults) info.defaults = sampling_defaults_from(generation);

  const auto& config = tokenizer.config();
  const auto parse = [&](const auto& load, const char* which) {
    try {
      return std::make_shared<const tokenizer::ChatTemplate>(load());
    } catch (const Error& e) {
      fail("the ", which, " chat template of ", model_dir, " does not parse: ", e.what());
    }
  };
  const auto& named = config.named_templates;
  if (tokenizer::has_chat_template(config)) {
    info.chat_template =
        parse([&] { return tokenizer::load_chat_template(config, false); }, "default");
  }
  if (named.contains("tool_use")) {
    info.tool_template =
        parse([&] { return tokenizer::ChatTemplate::parse(named.at("tool_use")); }, "tool_use");
  }
  info.bos_token = config.bos_token.value_or("");
  info.eos_token = config.eos_token.value_or("");
  return info;
}

int64_t prompt_byte_limit(const tokenizer::Tokenizer& tokenizer, int64_t max_model_len) {
  size_t longest = 1;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const int32_t token = static_cast<int32_t>(id);
    longest = std::max(longest, tokenizer.decode({&token, 1}, false).size());
  }
  return (max_model_len + 1) * static_cast<int64_t>(longest) * 4 + 4096;
}

AdmissionLimits admission_limits_for(const ServerOptions& options, const ModelInfo& info) {
  AdmissionLimits limits;
  limits.max_waiting_requests = options.max_waiting_requests >= 0
                                    ? options.max_waiting_requests
                                    : std::max<int64_t>(64, 4 * info.max_num_seqs);
  limits.max_waiting_tokens = options.max_waiting_tokens >= 0
                                  ? options.max_waiting_tokens
                                  : std::max(2 * info.kv_pool_tokens, 4 * info.max_model_len);
  return limits;
}

}  // namespace deepinfer::server
