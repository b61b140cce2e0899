// deepinfer generate: load a checkpoint and greedily continue one prompt.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/generate_batch.h"
#include "cli/model_flags.h"
#include "config/setup.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/greedy.h"
#include "io/hf_config.h"
#include "io/npy.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer generate --model DIR (--prompt-ids 1,2,3 | --prompt TEXT)\n"
    "         [--max-new-tokens N] [--temperature 0] [--threads T] [--dtype auto|f32|bf16|f16]\n"
    "         [--matmul-precision f32|bf16]\n"
    "         [--ignore-eos] [--json] [--dump-logits FILE.npy] [--prefill-chunk N]\n"
    "         [--block-size 16] [--log-level info]\n"
    "   or: deepinfer generate --model DIR --prompts-file FILE.jsonl [--max-new-tokens N]\n"
    "         [--temperature 0] [--ignore-eos] [engine flags]   (one JSON line per prompt)\n";

// --prompt TEXT is encoded as transformers' tokenizer(text) does (add_special_tokens).
std::vector<int32_t> prompt_ids_from(const Args& args, const model::CausalLM& model,
                                     const tokenizer::Tokenizer* tok) {
  DI_CHECK(args.has("prompt-ids") != args.has("prompt"),
           "give exactly one of --prompt-ids and --prompt");
  if (const auto text = args.get("prompt")) {
    DI_CHECK(tok != nullptr,
             "--prompt needs tokenizer.json in the model directory; use --prompt-ids");
    return tok->encode(*text, true);
  }
  std::vector<int32_t> ids;
  for (int64_t id : args.get_int_list("prompt-ids")) {
    DI_CHECK(id >= 0 && id < model.vocab_size(), "--prompt-ids: token id ", id,
             " is outside the vocabulary [0, ", model.vocab_size(), ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

int run_generate(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    std::printf("%s%s", kUsage, kEngineFlagsUsage);
    return 0;
  }
  const Args args(argv,
                  with_engine_value_flags(with_model_flags(
                      {"prompt-ids", "prompt", "max-new-tokens", "temperature", "dump-logits",
                       "prefill-chunk", "block-size", "prompts-file"})),
                  with_engine_bool_flags({"json", "ignore-eos"}));
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  if (args.has("prompts-file")) return run_prompts_file(args);
  // A single prompt runs without the serving engine: of its flags only --block-size and
  // --kv-cache-dtype apply (with --dump-logits, a precision check of a reduced cache).
  for (const auto& flag : with_engine_value_flags(with_engine_bool_flags({}))) {
    DI_CHECK(flag == "block-size" || flag == "kv-cache-dtype" || !args.has(flag), "--", flag,
             " applies to the engine, i.e. with --prompts-file");
  }
  const double temperature = args.get_double("temperature", 0.0);
  DI_CHECK(temperature == 0.0,
           "--temperature: a single prompt runs greedily (0); sample with --prompts-file; got ",
           temperature);
  const int64_t max_new = args.get_int("max-new-tokens", 16);
  DI_CHECK(max_new >= 0, "--max-new-tokens must be >= 0");
  config::ModelSetup loaded =
      config::load_model_setup(recipe_from_flags(args, true), {.require_tokenizer = false});
  const int64_t block_size = loaded.engine.block_size;
  auto& model = loaded.model;
  auto& pool = loaded.pool;
  const auto& generation = loaded.generation;
  const auto& tok = loaded.tokenizer;
  const std::vector<int32_t> prompt = prompt_ids_from(args, *model, tok ? &*tok : nullptr);
  DI_CHECK(!prompt.empty(), "the prompt encodes to no tokens");

  const auto total = static_cast<int64_t>(prompt.size()) + max_new;
  cache::KvCache cache(model::kv_cache_spec(
      *model, block_size, (total + block_size - 1) / block_size, loaded.engine.kv_cache_dtype));
  engine::GreedyOptions options;
  options.max_new_tokens = max_new;
  options.eos_token_ids = generation.eos_token_ids;
  options.ignore_eos = args.flag("ignore-eos");
  options.prefill_chunk = args.get_int("prefill-chunk", 0);
  const auto result = engine::greedy_generate(*model, cache, prompt, options, *pool);

  if (const auto path = args.get("dump-logits")) {
    io::write_npy_f32(*path, result.prompt_logits,
                      {static_cast<int64_t>(result.prompt_logits.size())});
  }
  const auto decoded = static_cast<double>(result.output_ids.size());
  if (args.flag("json")) {
    nlohmann::ordered_json out;
    out["prompt_ids"] = prompt;
    out["output_ids"] = result.output_ids;
    if (tok) out["text"] = tok->decode(result.output_ids, true);
    out["finish_reason"] = result.stopped_at_eos ? "stop" : "length";
    out["prefill_seconds"] = result.prefill_seconds;
    out["decode_seconds"] = result.decode_seconds;
    out["decode_steps"] = result.decode_steps;
    std::printf("%s\n", out.dump().c_str());
  } else if (tok) {
    std::printf("%s\n", tok->decode(result.output_ids, true).c_str());
  } else {
    for (size_t i = 0; i < result.output_ids.size(); ++i) {
      std::printf("%s%d", i ? "," : "", result.output_ids[i]);
    }
    std::printf("\n");
  }
  log::info("prefill ", prompt.size(), " tokens in ", result.prefill_seconds, " s; decode ",
            decoded, " tokens in ", result.decode_seconds, " s");
  return 0;
}

const Registration registration("generate", "greedy generation from a prompt", &run_generate);

}  // namespace
}  // namespace deepinfer::cli
