// deepinfer validate: is this model (a conversion, a quantization, another KV cache dtype) still
// the model it was made from? Compares --model against --reference (another checkpoint or
// dtype) or a transformers --golden file; the comparisons live in src/validate/.
#include <cstdio>
#include <fstream>
#include <optional>

#include "cli/command.h"
#include "cli/model_flags.h"
#include "config/apply.h"
#include "config/setup.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "tokenizer/tokenizer.h"
#include "validate/validation.h"

#ifndef DEEPINFER_DATA_DIR
#define DEEPINFER_DATA_DIR "data"
#endif

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer validate --model A (--reference B | --golden FILE) [inputs] [metrics]\n"
    "  -m, --model A                    the model under test (directory or .gguf)\n"
    "  --dtype, --kv-cache-dtype        its weight and KV cache dtypes (as generate)\n"
    "  --quantization Q                 its projections quantized at load (as generate)\n"
    "  --quantize-lm-head               its lm_head too (as generate)\n"
    "  --reference B                    the model to match: another checkpoint, format or dtype\n"
    "  --reference-dtype D              B's weight dtype (default: as stored)\n"
    "  --reference-kv-cache-dtype D     B's KV cache dtype (default: auto, f32)\n"
    "  --reference-quantization Q       B's quantization at load (default: none)\n"
    "  --reference-quantize-lm-head     B's lm_head too\n"
    "  --golden FILE                    instead of B: tools/dump_reference.py output\n"
    "                                   (transformers, f32; its own prompts)\n"
    " inputs (default --preset fixed):\n"
    "  --prompts FILE.jsonl             {\"prompt\": TEXT} or {\"prompt_token_ids\": [...]} a "
    "line\n"
    "  --text FILE                      perplexity text (needs tokenizer.json)\n"
    "  --preset fixed|random|dataset    the committed prompt set | --num-prompts random prompts\n"
    "                                   of --prompt-len ids (--seed) | the committed text\n"
    "  --data-dir DIR                   where the presets are (default: the source tree's data/)\n"
    " metrics:\n"
    "  --max-new-tokens N               greedy tokens per prompt (default 16)\n"
    "  --window W --stride S            perplexity window (default min(max positions, 1024))\n"
    "                                   and stride (default W/2)\n"
    "  --layers                         compare every block output; names the first over\n"
    "  --tolerance T                    relative error (default 1e-2)\n"
    "  --max-kl K --min-agreement A     bounds: exit status 3 when the max KL exceeds K or the\n"
    "                                   greedy (else top-1) agreement is below A\n"
    "  --json [FILE]                    the report as JSON (stdout without FILE)\n"
    "  -t, --threads T  --log-level L\n";

const ArgsOptions kShortFlags = {.aliases = {{"m", "model"}, {"t", "threads"}}};

// `--json` alone prints JSON; `--json FILE` writes it: the parser takes one kind per flag.
std::vector<std::string> split_json_flag(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--json" && i + 1 < argv.size() && argv[i + 1].rfind("-", 0) != 0) {
      out.push_back("--json-file");
    } else {
      out.push_back(argv[i]);
    }
  }
  return out;
}

// `index`: the model's place in load order (under mpirun the other ranks follow both).
config::ModelSetup load(const Args& args, const std::string& path, const char* dtype_flag,
                        const char* kv_flag, const char* quantization_flag,
                        const char* lm_head_flag, int64_t index = 0) {
  config::RecipeConfig recipe;
  config::apply_override(recipe, "model_path", path, "--model");
  if (const auto v = args.get("threads"))
    config::apply_override(recipe, "threads", *v, "--threads", true);
  if (const auto v = args.get(dtype_flag)) {
    config::apply_override(recipe, "dtype", *v, str_cat("--", dtype_flag), true);
  }
  if (const auto v = args.get(kv_flag)) {
    config::apply_override(recipe, "kv_cache_dtype", *v, str_cat("--", kv_flag), true);
  }
  if (const auto v = args.get(quantization_flag)) {
    config::apply_override(recipe, "quantization", *v, str_cat("--", quantization_flag), true);
  }
  apply_quantize_lm_head_flag(recipe, args, lm_head_flag);
  apply_parallel_flags(recipe, args);
  apply_memory_flags(recipe, args);
  return config::load_model_setup(recipe, {.require_tokenizer = false,
                                           .progress_bar = false,
                                           .lockstep = true,
                                           .lockstep_index = index});
}

int run_validate(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  const Args args(split_json_flag(argv),
                  {"model",
                   "threads",
                   "log-level",
                   "dtype",
                   "kv-cache-dtype",
                   "reference",
                   "reference-dtype",
                   "reference-kv-cache-dtype",
                   "quantization",
                   "reference-quantization",
                   "golden",
                   "prompts",
                   "text",
                   "preset",
                   "num-prompts",
                   "prompt-len",
                   "seed",
                   "data-dir",
                   "max-new-tokens",
                   "window",
                   "stride",
                   "tolerance",
                   "max-kl",
                   "min-agreement",
                   "json-file",
                   "expert-parallel-size",
                   "tensor-parallel-size",
                   "pipeline-parallel-size"},
                  with_model_bool_flags(
                      with_parallel_bool_flags({"layers", "json", "reference-quantize-lm-head"})),
                  kShortFlags);
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  keep_freed_heap_memory(kKeptHeapBlockBytes);  // no server in this process
  const std::string model_path = args.require("model");
  DI_CHECK(args.has("reference") != args.has("golden"),
           "give one of --reference MODEL and --golden FILE to compare --model against");
  validate::ValidateOptions options;
  options.max_new_tokens = args.get_int("max-new-tokens", 16);
  options.window = args.get_int("window", 0);
  options.stride = args.get_int("stride", 0);
  options.layers = args.flag("layers");
  options.tolerance = args.get_double("tolerance", 1e-2);
  DI_CHECK(options.tolerance > 0, "--tolerance must be > 0, got ", options.tolerance);
  const std::optional<double> max_kl =
      args.has("max-kl") ? std::optional(args.get_double("max-kl", 0)) : std::nullopt;
  const std::optional<double> min_agreement =
      args.has("min-agreement") ? std::optional(args.get_double("min-agreement", 0)) : std::nullopt;

  validate::ValidationReport report;
  if (const auto golden_path = args.get("golden")) {
    for (const char* flag :
         {"prompts", "text", "preset", "reference-dtype", "reference-kv-cache-dtype",
          "reference-quantization", "reference-quantize-lm-head"}) {
      DI_CHECK(!args.has(flag), "--", flag, " does not apply with --golden (it holds its prompts)");
    }
    const validate::Golden golden = validate::read_golden(*golden_path);
    config::ModelSetup model =
        load(args, model_path, "dtype", "kv-cache-dtype", "quantization", "quantize-lm-head");
    if (config::is_lockstep_worker(model)) return config::run_lockstep_worker(model);
    validate::ModelProbe probe(*model.model, *model.pool, model.engine.kv_cache_dtype);
    report = validate::compare_golden(probe, golden, options);
  } else {
    const std::string reference_path = *args.get("reference");
    config::ModelSetup model =
        load(args, model_path, "dtype", "kv-cache-dtype", "quantization", "quantize-lm-head");
    config::ModelSetup reference =
        load(args, reference_path, "reference-dtype", "reference-kv-cache-dtype",
             "reference-quantization", "reference-quantize-lm-head", 1);
    if (config::is_lockstep_worker(model)) {
      model::CausalLM* const both[] = {model.model.get(), reference.model.get()};
      return config::run_lockstep_worker(both, model);
    }
    validate::check_comparable(*model.model, *reference.model, options.layers);
    const tokenizer::Tokenizer* tok = model.tokenizer ? &*model.tokenizer : nullptr;
    const int64_t vocab = model.model->vocab_size();
    const std::string data_dir = args.get_or("data-dir", DEEPINFER_DATA_DIR);

    std::vector<validate::ValidationPrompt> prompts;
    std::string text_path = args.get_or("text", "");
    if (const auto path = args.get("prompts"))
      prompts = validate::read_prompts_jsonl(*path, tok, vocab);
    const bool given = args.has("prompts") || args.has("text");
    const std::string preset = args.get_or("preset", given ? "" : "fixed");
    if (preset == "fixed") {
      DI_CHECK(tok != nullptr, "--preset fixed holds text prompts and ", model.dir,
               " has no tokenizer.json: use --preset random or --prompts with prompt_token_ids");
      auto more = validate::read_prompts_jsonl(validate::preset_prompts_path(data_dir), tok, vocab);
      prompts.insert(prompts.end(), more.begin(), more.end());
    } else if (preset == "random") {
      auto more =
          validate::random_prompts(args.get_int("num-prompts", 8), args.get_int("prompt-len", 32),
                                   vocab, static_cast<uint64_t>(args.get_int("seed", 0)));
      prompts.insert(prompts.end(), more.begin(), more.end());
    } else if (preset == "dataset") {
      DI_CHECK(text_path.empty(), "--preset dataset is the committed text: not with --text");
      text_path = validate::preset_text_path(data_dir);
    } else {
      DI_CHECK(preset.empty(), "--preset: expected fixed, random or dataset, got '", preset, "'");
    }
    std::vector<int32_t> text;
    if (!text_path.empty()) {
      DI_CHECK(tok != nullptr, "--text needs the model's tokenizer.json, which ", model.dir,
               " lacks");
      text = tok->encode(validate::read_text_file(text_path), /*add_special_tokens=*/true);
      DI_CHECK(text.size() >= 2, "--text: ", text_path, " encodes to fewer than 2 tokens");
    }
    validate::ModelProbe a(*model.model, *model.pool, model.engine.kv_cache_dtype);
    validate::ModelProbe b(*reference.model, *reference.pool, reference.engine.kv_cache_dtype);
    report = validate::compare_models(a, b, prompts, text, options);
    report.reference = reference_path;
    if (!text_path.empty()) report.perplexity_source = text_path;
  }
  report.model = model_path;
  validate::check_bounds(report, max_kl, min_agreement);

  const std::string json = validate::report_json(report).dump(2);
  if (const auto path = args.get("json-file")) {
    std::ofstream out(*path);
    DI_CHECK(out.good(), "--json: cannot write ", *path);
    out << json << "\n";
  }
  if (args.flag("json")) {
    std::printf("%s\n", json.c_str());
  } else {
    std::printf("%s", validate::report_table(report).c_str());
  }
  return report.passed() ? 0 : 3;
}

const Registration registration(
    "validate", "compare a model with a reference model or transformers golden (precision)",
    &run_validate);

}  // namespace
}  // namespace deepinfer::cli
