// deepinfer generate: load a checkpoint and continue one prompt (or a chat), greedily or
// sampled; --prompts-file runs many through the engine (generate_batch.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/chat_prompt.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/generate_batch.h"
#include "cli/model_flags.h"
#include "cli/sampling_flags.h"
#include "config/progress.h"
#include "config/setup.h"
#include "core/error.h"
#include "core/huge_page_arena.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/engine.h"
#include "engine/greedy.h"
#include "io/hf_config.h"
#include "io/npy.h"
#include "kernels/read_bandwidth.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: deepinfer generate -m MODEL (-p TEXT | --prompt-ids 1,2,3 | --chat -p TEXT |\n"
    "         --messages FILE.json) [-n MAX_NEW_TOKENS] [sampling] [flags]\n"
    "   or: deepinfer generate -m MODEL --prompts-file FILE.jsonl [sampling] [engine flags]\n"
    "  -m, --model DIR           checkpoint directory\n"
    "  -p, --prompt TEXT         text, encoded as transformers' tokenizer(text) does\n"
    "  --prompt-ids LIST         token ids instead of text\n"
    "  --chat                    render --prompt as one user message through the model's chat\n"
    "                            template (add_generation_prompt), as render-chat does\n"
    "  --messages FILE           a JSON list of {role, content} messages (implies --chat)\n"
    "  --chat-template FILE      a Jinja file instead of the model's chat template\n"
    "  --tokenizer DIR           tokenizer.json / tokenizer_config.json from another directory\n"
    "  -n, --max-new-tokens N    default 16\n"
    "  -c, --max-model-len N     context: prompt + output never exceed it\n"
    "  -t, --threads T           compute threads (default: every core)\n"
    "  --stream / --no-stream    print text as it is generated (default: on for --chat when\n"
    "                            stdout is a terminal and --json is not given)\n"
    "  --ignore-eos  --json  --dtype auto|f32|bf16|f16  --matmul-precision f32|bf16\n"
    "  --quantization TYPE  quantize at load: q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k|\n"
    "                            q4_k_m|w8a8|fp8 (int8 = q8_0, int4 = q4_k_m;\n"
    "                            docs/QUANTIZATION.md)\n"
    "  --log-level info  --block-size 16  --kv-cache-dtype auto|f32|bf16|f16|int8\n"
    "  sampling (default greedy): --temperature T  --top-p P  --top-k K  --min-p P\n"
    "                             --repetition-penalty R  --seed S (same seed, same tokens)\n"
    "  greedy only: --dump-logits FILE.npy (next-token logits at the last prompt position)\n"
    "               --prefill-chunk N\n"
    "  --warmup N                untimed runs of the prompt (prefill + one token) before the\n"
    "                            timed one, on the same KV cache: steady-state timings, as\n"
    "                            llama-bench's warm-up run; --json lists their prefill times\n"
    "  --measure-bandwidth       read the weights' own memory right before and after the run:\n"
    "                            its GB/s in --json (weights_read_gb_s), decode's roofline\n"
    "  --prompts-file: one JSON line per prompt ({\"prompt\": ...} or {\"prompt_ids\": [...]},\n"
    "                  sampling keys per line); the flags above are the defaults\n";

const ArgsOptions kShortFlags = {.aliases = with_parallel_aliases({{"m", "model"},
                                                                   {"p", "prompt"},
                                                                   {"n", "max-new-tokens"},
                                                                   {"c", "max-model-len"},
                                                                   {"t", "threads"}})};

// Engine flags that mean something for one prompt; the rest size a multi-request engine.
const std::set<std::string> kSinglePromptEngineFlags = {
    "block-size", "kv-cache-dtype", "max-model-len", "allow-long-max-model-len"};

// The prompt's token ids: text (as transformers' tokenizer(text)), a chat rendered through
// the template (its special tokens are in the text), or ids.
std::vector<int32_t> prompt_ids_from(const Args& args, const config::ModelSetup& loaded,
                                     bool chat) {
  const tokenizer::Tokenizer* tok = loaded.tokenizer ? &*loaded.tokenizer : nullptr;
  const int given = static_cast<int>(args.has("prompt-ids")) +
                    static_cast<int>(args.has("prompt")) + static_cast<int>(args.has("messages"));
  DI_CHECK(given == 1, "give exactly one of --prompt, --prompt-ids and --messages");
  if (chat) {
    DI_CHECK(!args.has("prompt-ids"),
             "--chat renders text through the chat template: give --prompt or --messages");
    DI_CHECK(tok != nullptr, "--chat needs tokenizer.json in ", loaded.dir,
             " (or --tokenizer DIR)");
    const nlohmann::ordered_json messages =
        args.has("messages")
            ? read_messages_file(*args.get("messages"), "--messages")
            : nlohmann::ordered_json::array({{{"role", "user"}, {"content", *args.get("prompt")}}});
    const std::string rendered =
        render_chat_prompt(*tok, loaded.dir, messages, args.get("chat-template"));
    return tok->encode(rendered, false);
  }
  if (const auto text = args.get("prompt")) {
    DI_CHECK(tok != nullptr,
             "--prompt needs tokenizer.json in the model directory; use --prompt-ids");
    return tok->encode(*text, true);
  }
  std::vector<int32_t> ids;
  const int64_t vocab = loaded.model->vocab_size();
  for (int64_t id : args.get_int_list("prompt-ids")) {
    DI_CHECK(id >= 0 && id < vocab, "--prompt-ids: token id ", id,
             " is outside the vocabulary [0, ", vocab, ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

struct Generated {
  std::vector<int32_t> output_ids;
  std::string finish_reason;
  std::vector<float> prompt_logits;  // greedy loop only
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int64_t decode_steps = 0;
  bool streamed = false;                       // the text is already on stdout
  std::vector<double> warmup_prefill_seconds;  // --warmup runs; the first is the cold prefill
};

// Plain greedy decoding: the simplest loop, with the prompt's logits for --dump-logits.
Generated run_greedy(const Args& args, config::ModelSetup& loaded,
                     const std::vector<int32_t>& prompt, const engine::SamplingParams& params,
                     int64_t warmup) {
  const int64_t block_size = loaded.engine.block_size;
  const auto total = static_cast<int64_t>(prompt.size()) + params.max_new_tokens;
  cache::KvCache cache(
      model::kv_cache_spec(*loaded.model, block_size, (total + block_size - 1) / block_size,
                           loaded.engine.kv_cache_dtype, loaded.engine.kv_huge_pages));
  engine::GreedyOptions options;
  options.max_new_tokens = params.max_new_tokens;
  options.eos_token_ids = loaded.generation.eos_token_ids;
  options.ignore_eos = params.ignore_eos;
  options.prefill_chunk = args.get_int("prefill-chunk", 0);
  std::vector<double> warmups;
  for (int64_t run = 0; run < warmup; ++run) {
    engine::GreedyOptions once = options;
    once.max_new_tokens = std::min<int64_t>(options.max_new_tokens, 1);
    warmups.push_back(
        engine::greedy_generate(*loaded.model, cache, prompt, once, *loaded.pool).prefill_seconds);
  }
  auto result = engine::greedy_generate(*loaded.model, cache, prompt, options, *loaded.pool);
  return {.output_ids = std::move(result.output_ids),
          .finish_reason = result.stopped_at_eos ? "stop" : "length",
          .prompt_logits = std::move(result.prompt_logits),
          .prefill_seconds = result.prefill_seconds,
          .decode_seconds = result.decode_seconds,
          .decode_steps = result.decode_steps,
          .warmup_prefill_seconds = std::move(warmups)};
}

// Sampling and streaming: the serving engine with one sequence, its pool sized to exactly
// this prompt + output (the sampler is the server's: same seed, same tokens).
Generated run_engine(config::ModelSetup& loaded, const std::vector<int32_t>& prompt,
                     const engine::SamplingParams& params, bool stream, int64_t warmup) {
  engine::EngineConfig ec = loaded.engine;
  const auto total =
      static_cast<int64_t>(prompt.size()) + std::max<int64_t>(params.max_new_tokens, 1);
  ec.max_num_seqs = 1;
  ec.max_num_blocks = (total + ec.block_size - 1) / ec.block_size;
  ec.kv_cache_memory_gib = 0;
  ec.max_model_len = total;
  ec.max_num_batched_tokens = std::max<int64_t>(ec.max_num_batched_tokens, total);
  const tokenizer::Tokenizer* tok = loaded.tokenizer ? &*loaded.tokenizer : nullptr;
  engine::Engine engine(*loaded.model, *loaded.pool, ec, tok);

  // One request through the engine to its end; on_delta sees each of its deltas.
  const auto run_request = [&](const engine::SamplingParams& request, const auto& on_delta) {
    engine.add_request(prompt, request);
    while (engine.has_unfinished()) {
      for (const auto& step : engine.step()) {
        if (!step.error.empty()) fail(step.error);
        for (const auto& delta : step.completions) on_delta(delta);
      }
    }
  };
  Generated out;
  out.streamed = stream;
  engine::SamplingParams once = params;
  once.max_new_tokens = std::min<int64_t>(params.max_new_tokens, 1);
  for (int64_t run = 0; run < warmup; ++run) {
    const auto warm_start = Clock::now();
    run_request(once, [](const auto&) {});
    out.warmup_prefill_seconds.push_back(
        std::chrono::duration<double>(Clock::now() - warm_start).count());
  }
  const auto start = Clock::now();
  std::optional<Clock::time_point> first_token;
  engine::Completion completion;
  run_request(params, [&](const auto& delta) {
    if (!first_token && !delta.token_ids.empty()) first_token = Clock::now();
    engine::accumulate(completion, delta);
    if (stream && !delta.text.empty()) {
      std::fwrite(delta.text.data(), 1, delta.text.size(), stdout);
      std::fflush(stdout);
    }
  });
  const auto end = Clock::now();
  out.output_ids = completion.token_ids;
  out.finish_reason = engine::finish_reason_name(completion.finish_reason);
  out.prefill_seconds = std::chrono::duration<double>(first_token.value_or(end) - start).count();
  out.decode_seconds = std::chrono::duration<double>(end - first_token.value_or(end)).count();
  out.decode_steps = std::max<int64_t>(0, static_cast<int64_t>(out.output_ids.size()) - 1);
  return out;
}

int run_generate(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf("%s%s%s%s", kUsage, kEngineFlagsUsage, kModelFlagsUsage, kParallelFlagsUsage);
    return 0;
  }
  const Args args(
      argv,
      with_parallel_value_flags(with_engine_value_flags(with_sampling_value_flags(
          with_model_flags({"prompt-ids", "prompt", "messages", "chat-template", "tokenizer",
                            "dump-logits", "prefill-chunk", "prompts-file", "warmup"})))),
      with_model_bool_flags(with_parallel_bool_flags(with_engine_bool_flags(
          {"json", "ignore-eos", "chat", "stream", "no-stream", "measure-bandwidth"}))),
      kShortFlags);
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  keep_freed_heap_memory(kKeptHeapBlockBytes);  // no server in this process
  if (args.has("prompts-file")) {
    DI_CHECK(
        !args.has("chat") && !args.has("messages") && !args.has("stream") && !args.has("warmup"),
        "--prompts-file prints one JSON line per prompt: --chat, --messages, --stream and "
        "--warmup apply to a single prompt");
    return run_prompts_file(args);
  }
  // One prompt: of the engine flags only these apply (the rest size a many-request pool).
  for (const auto& flag : with_engine_value_flags(with_engine_bool_flags({}))) {
    DI_CHECK(kSinglePromptEngineFlags.contains(flag) || !args.has(flag), "--", flag,
             " applies to the engine, i.e. with --prompts-file");
  }
  DI_CHECK(!(args.flag("stream") && args.flag("no-stream")),
           "give one of --stream and --no-stream");
  DI_CHECK(!(args.flag("stream") && args.flag("json")),
           "--stream prints text as it comes and --json one object at the end: give one");
  const bool chat = args.flag("chat") || args.has("messages");
  DI_CHECK(chat || !args.has("chat-template"), "--chat-template applies with --chat / --messages");
  const bool stream = args.flag("stream") || (chat && !args.flag("no-stream") &&
                                              !args.flag("json") && isatty(STDOUT_FILENO) == 1);
  engine::SamplingParams params = sampling_from_flags(args);
  const bool sampled = samples(params);
  if (sampled || stream) {
    for (const char* flag : {"dump-logits", "prefill-chunk"}) {
      DI_CHECK(!args.has(flag), "--", flag,
               " runs the greedy loop: it does not go with sampling (--temperature > 0, "
               "--repetition-penalty) or --stream");
    }
  }

  config::RecipeConfig recipe = recipe_from_flags(args, true);
  apply_setting_flags(recipe, args, {"tokenizer"});
  config::ModelSetup loaded =
      config::load_model_setup(recipe, {.require_tokenizer = false, .lockstep = true});
  if (config::is_lockstep_worker(loaded)) return config::run_lockstep_worker(loaded);
  const std::vector<int32_t> prompt = prompt_ids_from(args, loaded, chat);
  DI_CHECK(!prompt.empty(), "the prompt encodes to no tokens");
  params.validate(loaded.model->vocab_size());
  if (loaded.engine.max_model_len > 0) {
    // -c / --max-model-len: the context holds prompt and output (as llama.cpp's -c).
    const auto room = loaded.engine.max_model_len - static_cast<int64_t>(prompt.size());
    DI_CHECK(room > 0, "the prompt has ", prompt.size(), " tokens and leaves no room within ",
             "--max-model-len ", loaded.engine.max_model_len);
    params.max_new_tokens = std::min(params.max_new_tokens, room);
  }
  const auto& tok = loaded.tokenizer;
  DI_CHECK(!stream || tok.has_value(), "--stream prints text: it needs tokenizer.json in ",
           loaded.dir);

  const int64_t warmup = args.get_int("warmup", 0);
  DI_CHECK(warmup >= 0, "--warmup: expected a count of runs >= 0, got ", warmup);
  // The weights a decode streams are the huge-paged ones (packed and repacked at load), read
  // as they are right before and right after the run.
  const bool measure = args.flag("measure-bandwidth");
  std::vector<double> read_gb_s;
  size_t read_bytes = 0;
  const auto measure_weights = [&] {
    const std::vector<MemoryRun> weights = huge_paged_in_use();
    read_bytes = 0;
    for (const MemoryRun& run : weights) read_bytes += run.bytes;
    read_gb_s.push_back(kernels::read_bandwidth(weights, *loaded.pool));
  };
  if (measure) measure_weights();
  const Generated result = sampled || stream ? run_engine(loaded, prompt, params, stream, warmup)
                                             : run_greedy(args, loaded, prompt, params, warmup);
  if (measure) {
    measure_weights();
    log::info("the weights' own memory (", config::fixed(static_cast<double>(read_bytes) / 1e6, 1),
              " MB) read at ", config::fixed(read_gb_s[0], 1), " GB/s before the run and ",
              config::fixed(read_gb_s[1], 1), " GB/s after it");
  }

  if (const auto path = args.get("dump-logits")) {
    io::write_npy_f32(*path, result.prompt_logits,
                      {static_cast<int64_t>(result.prompt_logits.size())});
  }
  if (args.flag("json")) {
    nlohmann::ordered_json out;
    out["prompt_ids"] = prompt;
    out["output_ids"] = result.output_ids;
    if (tok) out["text"] = tok->decode(result.output_ids, true);
    out["finish_reason"] = result.finish_reason;
    if (params.seed) out["seed"] = *params.seed;
    out["prefill_seconds"] = result.prefill_seconds;
    out["decode_seconds"] = result.decode_seconds;
    out["decode_steps"] = result.decode_steps;
    if (!result.warmup_prefill_seconds.empty())
      out["warmup_prefill_seconds"] = result.warmup_prefill_seconds;
    if (measure) {
      out["weights_read_bytes"] = read_bytes;
      out["weights_read_gb_s"] = read_gb_s;  // before and after the run
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (result.streamed) {
    std::printf("\n");
  } else if (tok) {
    std::printf("%s\n", tok->decode(result.output_ids, true).c_str());
  } else {
    for (size_t i = 0; i < result.output_ids.size(); ++i) {
      std::printf("%s%d", i ? "," : "", result.output_ids[i]);
    }
    std::printf("\n");
  }
  const auto decoded = static_cast<double>(result.output_ids.size());
  log::info("prefill ", prompt.size(), " tokens in ", result.prefill_seconds, " s; decode ",
            decoded, " tokens in ", result.decode_seconds, " s",
            result.decode_seconds > 0
                ? str_cat(" (",
                          config::fixed(
                              static_cast<double>(result.decode_steps) / result.decode_seconds, 1),
                          " tok/s)")
                : std::string());
  return 0;
}

const Registration registration("generate",
                                "continue a prompt or a chat (greedy or sampled, -m -p -n)",
                                &run_generate);

}  // namespace
}  // namespace deepinfer::cli
