#include "config/runtime.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "config/apply.h"
#include "config/progress.h"
#include "core/log.h"
#include "core/text_file.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string join(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += str_cat(out.empty() ? "" : ",", id);
  return out;
}

void log_layout(const RecipeConfig& config, const model::CausalLM& model,
                const parallel::ParallelContext& parallel, int threads) {
  if (parallel.distributed()) {
    const int64_t experts = routed_experts(model.config());
    log::info("initializing parallel layout: world size ", parallel.world_size(),
              " (mpirun), expert parallel ", parallel.expert_parallel_size(),
              ", attention replicated on every rank; ", threads, " compute threads per rank",
              config.devices.has() ? str_cat(", devices ", join(*config.devices), " one per rank")
                                   : std::string());
    log::info("initializing EP parallel with ", parallel.expert_parallel_size(),
              " ranks; experts distributed: ", experts / parallel.expert_parallel_size(),
              " per rank (", experts, " routed experts, top-", experts_per_token(model.config()),
              " routing)");
    return;
  }
  if (config.devices.has()) {
    log::info("CPU build: there are no NPUs here; the ", config.devices->size(),
              " devices listed (", join(*config.devices), ") map to ",
              config.threads.has() ? "ranks, of which this build runs one; --threads sets "
                                     "the compute threads"
                                   : str_cat(config.devices->size(), " compute threads"),
              " in one process; for one rank per device launch `mpirun -np ",
              config.devices->size(), " deepinfer ...` (docs/DISTRIBUTED.md)");
  }
  log::info("initializing parallel layout: world size 1 (one process), tensor parallel ",
            config.tensor_parallel_size.value_or(1), ", pipeline parallel ",
            config.pipeline_parallel_size.value_or(1), ", expert parallel ",
            config.expert_parallel_size.value_or(1), ", attention data parallel ",
            config.data_parallel_size.value_or(1), "; ", threads, " compute threads");
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
  // Only what the layers actually call (model/layers): the Q/K/V/O projections are separate
  // kernels; attention, the residual add + RMSNorm and the expert GEMMs are the fused /
  // grouped parts (enable_atb_attention / enable_atb_moe false: the unfused ones).
  const bool fused = config.attention_fusion.value_or(true);
  const bool moe_fused = config.moe_fusion.value_or(true);
  const char* const moe =
      experts == 0 ? ""
      : moe_fused  ? "; grouped MoE (every expert of a step in one job on packed panels, gate and "
                     "up in one GEMM with SiLU in its epilogue, for f32 / bf16 experts)"
                   : "; per-expert MoE (the tokens routed to each expert in one GEMM per "
                     "projection)";
  if (fused) {
    log::info(
        "loading fused operators: paged attention (one flash-style kernel per layer: scores, "
        "online softmax and the weighted sum of values over the paged KV cache); residual add + "
        "RMSNorm (one pass)",
        moe);
  } else {
    log::info("loading unfused operators (", config.attention_fusion.origin,
              " = false): attention as three passes (scores, softmax, weighted sum of values); "
              "residual add, then RMSNorm",
              moe);
  }
  log::info("attention fusion: ", fused ? "enabled" : "disabled", ", MoE fusion: ",
            experts == 0 ? "not applicable (no MoE layers)"
            : moe_fused  ? "enabled"
                         : "disabled");
}

}  // namespace

std::unique_ptr<Runtime> Runtime::start(const RecipeConfig& config, const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->config_ = config;
  // The runtime takes text: a tokenizer is required whatever options.setup says.
  // Under mpirun this is rank 0 (the other ranks follow_driver): its model runs in lockstep.
  rt->setup_ = load_model_setup(
      config,
      {.require_tokenizer = true, .progress_bar = options.setup.progress_bar, .lockstep = true});
  ModelSetup& s = rt->setup_;
  const tokenizer::TokenizerConfig& tc = s.tokenizer->config();
  if (config.chat_template.has()) {
    try {
      rt->chat_ = std::make_unique<tokenizer::ChatTemplate>(
          tokenizer::ChatTemplate::parse(read_text_file(*config.chat_template)));
    } catch (const Error& e) {
      throw ConfigError(str_cat(config.chat_template.origin, " = \"", *config.chat_template,
                                "\": the template does not parse: ", e.what()));
    }
    log::info("chat template: ", *config.chat_template, " (", config.chat_template.origin, ")");
  } else if (tokenizer::has_chat_template(tc)) {
    try {
      rt->chat_ =
          std::make_unique<tokenizer::ChatTemplate>(tokenizer::load_chat_template(tc, false));
    } catch (const Error& e) {
      fail("the chat template of ", s.dir, " does not parse: ", e.what());
    }
  }

  log_layout(config, *s.model, *s.parallel, s.pool->size());
  rt->engine_ = std::make_unique<engine::Engine>(*s.model, *s.pool, s.engine, &*s.tokenizer);
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
    const int32_t token = s.tokenizer->bos_id().value_or(0);
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
  fs::path path = fs::path(setup_.dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "dir/" -> "dir"
  return path.filename().string();
}

std::vector<int32_t> Runtime::encode_prompt(std::string_view text) const {
  return setup_.tokenizer->encode(text, true);
}

std::string Runtime::render_chat(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& template_kwargs) const {
  if (!chat_) {
    fail(setup_.dir,
         "/tokenizer_config.json has no chat_template: this model cannot chat; use "
         "plain prompts (generate)");
  }
  const nlohmann::ordered_json kwargs =
      template_kwargs.is_null() ? nlohmann::ordered_json::object() : template_kwargs;
  return chat_->render(messages, nlohmann::ordered_json(nullptr), true,
                       setup_.tokenizer->config().bos_token.value_or(""),
                       setup_.tokenizer->config().eos_token.value_or(""), kwargs);
}

std::vector<int32_t> Runtime::encode_chat(const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& template_kwargs) const {
  return setup_.tokenizer->encode(render_chat(messages, template_kwargs), false);
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
