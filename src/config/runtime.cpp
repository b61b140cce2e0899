#include "config/runtime.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "cache/block_manager.h"
#include "config/apply.h"
#include "config/progress.h"
#include "core/log.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

uint64_t checkpoint_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors") {
      total += entry.file_size();
    }
  }
  return total;
}

std::string join(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += str_cat(out.empty() ? "" : ",", id);
  return out;
}

// mem_fraction_static: weights + KV cache within that share of RAM, the KV pool no larger
// than max_num_seqs sequences of max_model_len tokens need.
void size_pool_by_memory_fraction(const RecipeConfig& config, const model::CausalLM& model,
                                  uint64_t weight_bytes, engine::EngineConfig& ec) {
  const double fraction = *config.mem_fraction_static;
  const uint64_t total = memory_total_bytes();
  if (total == 0) {
    throw ConfigError(str_cat(config.mem_fraction_static.origin,
                              ": cannot read MemTotal from /proc/meminfo to size the KV cache; "
                              "use max_num_blocks instead"));
  }
  const double budget = fraction * static_cast<double>(total) - static_cast<double>(weight_bytes);
  if (budget <= 0) {
    throw ConfigError(str_cat(config.mem_fraction_static.origin, " = ", fraction,
                              " leaves no memory for the KV cache: the weights take ",
                              fixed(static_cast<double>(weight_bytes) / (1ull << 30), 2),
                              " GiB of ", fixed(static_cast<double>(total) / (1ull << 30), 2),
                              " GiB; raise it"));
  }
  cache::KvCacheSpec spec = model::kv_cache_spec(model, ec.block_size, 1);
  spec.dtype = ec.kv_cache_dtype;
  const int64_t bytes_per_token = spec.bytes_per_token();
  const int64_t budget_blocks = cache::BlockManager::blocks_for_memory(
      budget / static_cast<double>(1ull << 30), bytes_per_token, ec.block_size);
  const int64_t model_max = model.config().max_position_embeddings;
  const int64_t len = ec.max_model_len > 0 ? ec.max_model_len : model_max > 0 ? model_max : 8192;
  const int64_t wanted = ec.max_num_seqs * ((len + ec.block_size - 1) / ec.block_size);
  ec.max_num_blocks = std::max<int64_t>(1, std::min(budget_blocks, wanted));
  log::info("mem_fraction_static ", fraction, ": ",
            fixed(fraction * static_cast<double>(total) / (1ull << 30), 1),
            " GiB for weights + KV cache; KV pool ", ec.max_num_blocks, " blocks");
}

void log_layout(const RecipeConfig& config, const model::CausalLM& model, int threads) {
  if (config.devices.has()) {
    log::info("CPU build: there are no NPUs here; the ", config.devices->size(),
              " devices listed (", join(*config.devices), ") map to ",
              config.threads.has() ? "ranks, of which this build runs one; --threads sets "
                                     "the compute threads"
                                   : str_cat(config.devices->size(), " compute threads"),
              " in one process");
  }
  log::info("initializing parallel layout: world size 1 (one process), tensor parallel ",
            config.tensor_parallel_size.value_or(1), ", pipeline parallel ",
            config.pipeline_parallel_size.value_or(1), ", expert parallel ",
            config.expert_parallel_size.value_or(1), ", attention data parallel 1; ", threads,
            " compute threads");
  const int64_t experts = routed_experts(model.config());
  if (experts > 0) {
    log::info("initializing EP parallel with 1 device; experts distributed: ", experts,
              " per device (", experts, " routed experts, top-", experts_per_token(model.config()),
              " routing)");
    if (config.communication_dtype.has()) {
      log::info(config.communication_dtype.origin, " = ", *config.communication_dtype,
                ": nothing to convert, the all-to-all of one process is an in-memory copy");
    }
  }
  log::info(
      "loading fused operators: attention (QKV projection + scores + output over the "
      "paged KV cache)",
      experts > 0 ? ", MoE (routing + grouped expert GEMMs + weighted sum)" : "",
      ", RMSNorm fused with its neighbours");
  log::info("attention fusion: enabled, MoE fusion: ",
            experts > 0 ? "enabled" : "enabled (this model has no MoE layers)");
}

}  // namespace

std::unique_ptr<Runtime> Runtime::start(const RecipeConfig& config, const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->config_ = config;
  rt->model_dir_ = resolve_model_path(config);
  const std::string& dir = rt->model_dir_;

  // Everything checkable without weights first: a bad config loads nothing.
  const io::ModelConfig model_config = io::ModelConfig::load(dir);
  check_checkpoint(config, model_config, dir);
  rt->generation_ = io::GenerationConfig::load(dir, model_config);
  rt->sampling_ = config::sampling_defaults(config, rt->generation_);
  engine::EngineConfig ec = engine_config(config, rt->generation_);
  if (!fs::exists(fs::path(dir) / "tokenizer.json")) {
    fail(dir,
         ": no tokenizer.json; `deepinfer run` and the Python API take text, so the model "
         "directory needs its tokenizer");
  }

  log::info("loading model from ", dir);
  const auto load_start = Clock::now();
  prefault_checkpoint(dir, options.progress_bar);
  rt->model_ = model::load_model(dir, load_options(config));
  rt->tokenizer_ = tokenizer::Tokenizer::load_dir(dir);
  const tokenizer::TokenizerConfig& tc = rt->tokenizer_->config();
  if (tc.chat_template || tc.named_templates.contains("default")) {
    rt->chat_ = std::make_unique<tokenizer::ChatTemplate>(
        tokenizer::ChatTemplate::parse(tokenizer::select_chat_template(tc, false)));
  }
  log::info("model loaded in ", fixed(seconds_since(load_start), 2), " s (",
            model_config.architecture, ", ", model_config.num_hidden_layers, " layers, weights ",
            config.dtype.value_or("auto") == "auto" ? "as stored" : *config.dtype, ")");

  rt->pool_ = std::make_unique<ThreadPool>(static_cast<int>(thread_count(config)));
  log_layout(config, *rt->model_, rt->pool_->size());
  if (config.mem_fraction_static.has()) {
    size_pool_by_memory_fraction(config, *rt->model_, checkpoint_bytes(dir), ec);
  }
  rt->engine_ = std::make_unique<engine::Engine>(*rt->model_, *rt->pool_, ec, &*rt->tokenizer_);
  const auto& resolved = rt->engine_->config();
  log::info("KV cache: ", resolved.max_num_blocks, " blocks of ", resolved.block_size,
            " tokens (paged, ", dtype_name(resolved.kv_cache_dtype), "), max_model_len ",
            resolved.max_model_len, ", max_num_seqs ", resolved.max_num_seqs);

  if (options.warm_up) {
    log::info("warming up");
    const auto warm_start = Clock::now();
    engine::SamplingParams warm;
    warm.temperature = 0;
    warm.max_new_tokens = 2;
    warm.ignore_eos = true;
    const int32_t token = rt->tokenizer_->bos_id().value_or(0);
    rt->engine_->generate({{token}}, {warm});
    log::info("warm-up completed in ", fixed(seconds_since(warm_start), 2), " s");
  }
  rt->client_ = std::make_unique<engine::EngineClient>(*rt->engine_);
  return rt;
}

Runtime::~Runtime() {
  if (client_) client_->shutdown();
  client_.reset();
  engine_.reset();
}

std::string Runtime::served_name() const {
  if (config_.model_name.has()) return *config_.model_name;
  fs::path path = fs::path(model_dir_).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "dir/" -> "dir"
  return path.filename().string();
}

std::vector<int32_t> Runtime::encode_prompt(std::string_view text) const {
  return tokenizer_->encode(text, true);
}

std::string Runtime::render_chat(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& template_kwargs) const {
  if (!chat_) {
    fail(model_dir_,
         "/tokenizer_config.json has no chat_template: this model cannot chat; use "
         "plain prompts (generate)");
  }
  const nlohmann::ordered_json kwargs =
      template_kwargs.is_null() ? nlohmann::ordered_json::object() : template_kwargs;
  return chat_->render(messages, nlohmann::ordered_json(nullptr), true,
                       tokenizer_->config().bos_token.value_or(""),
                       tokenizer_->config().eos_token.value_or(""), kwargs);
}

std::vector<int32_t> Runtime::encode_chat(const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& template_kwargs) const {
  return tokenizer_->encode(render_chat(messages, template_kwargs), false);
}

int64_t Runtime::fit_request(int64_t prompt_tokens, int64_t requested) const {
  if (config_.max_prompt_len.has() && prompt_tokens > *config_.max_prompt_len) {
    fail("the prompt has ", prompt_tokens, " tokens, over ", config_.max_prompt_len.origin, " = ",
         *config_.max_prompt_len,
         " (deepinfer refuses rather than cut a prompt: a truncated chat loses its assistant "
         "header); shorten it, or /reset the conversation");
  }
  const int64_t room = engine_->config().max_model_len - prompt_tokens;
  if (room <= 0) {
    fail("the prompt has ", prompt_tokens,
         " tokens and leaves no room to answer within "
         "max_model_len ",
         engine_->config().max_model_len,
         "; shorten it, /reset the conversation, or raise max_seq_len");
  }
  return std::min(requested, room);
}

}  // namespace deepinfer::config
