#include "cli/generate_batch.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "cli/engine_flags.h"
#include "cli/model_flags.h"
#include "cli/sampling_flags.h"
#include "config/setup.h"
#include "core/error.h"
#include "core/log.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

namespace {

const std::set<std::string> kLineKeys = {"prompt",
                                         "prompt_ids",
                                         "priority",
                                         "temperature",
                                         "top_k",
                                         "top_p",
                                         "min_p",
                                         "repetition_penalty",
                                         "presence_penalty",
                                         "frequency_penalty",
                                         "seed",
                                         "max_tokens",
                                         "max_new_tokens",
                                         "stop",
                                         "stop_token_ids",
                                         "ignore_eos",
                                         "n",
                                         "logprobs"};

template <typename T>
T get_as(const nlohmann::json& line, const char* key, const std::string& where) {
  try {
    return line.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail(where, ": \"", key, "\" has the wrong type (", line.at(key).type_name(), ")");
  }
}

nlohmann::ordered_json logprobs_json(const std::vector<int32_t>& ids,
                                     const std::vector<engine::TokenLogprobs>& logprobs) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < logprobs.size() && i < ids.size(); ++i) {
    nlohmann::ordered_json entry;
    entry["token"] = ids[i];
    entry["logprob"] = logprobs[i].chosen;
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const auto& [id, lp] : logprobs[i].top) top.push_back({id, lp});
    entry["top_logprobs"] = top;
    out.push_back(entry);
  }
  return out;
}

nlohmann::ordered_json completion_json(const engine::Completion& c, bool has_tokenizer,
                                       bool with_logprobs) {
  nlohmann::ordered_json out;
  out["output_ids"] = c.token_ids;
  out["text"] = has_tokenizer ? nlohmann::ordered_json(c.text) : nlohmann::ordered_json();
  out["finish_reason"] = engine::finish_reason_name(c.finish_reason);
  if (!c.stop.empty()) out["stop"] = c.stop;
  if (with_logprobs) out["logprobs"] = logprobs_json(c.token_ids, c.logprobs);
  return out;
}

}  // namespace

std::set<std::string> prompts_file_value_flags() {
  return {"prompts-file"};
}

PromptLine parse_prompt_line(const nlohmann::json& line, const engine::SamplingParams& defaults,
                             const std::string& where) {
  DI_CHECK(line.is_object(), where, ": expected a JSON object like {\"prompt\": \"...\"}");
  for (const auto& [key, value] : line.items()) {
    DI_CHECK(kLineKeys.contains(key), where, ": unknown key \"", key,
             "\" (prompt, prompt_ids, priority, temperature, top_k, top_p, min_p, "
             "repetition_penalty, presence_penalty, frequency_penalty, seed, max_tokens, "
             "max_new_tokens, stop, stop_token_ids, ignore_eos, n, logprobs)");
  }
  PromptLine out;
  DI_CHECK(line.contains("prompt") != line.contains("prompt_ids"), where,
           ": give exactly one of \"prompt\" and \"prompt_ids\"");
  if (line.contains("prompt")) {
    out.text = get_as<std::string>(line, "prompt", where);
    out.has_text = true;
  } else {
    out.ids = get_as<std::vector<int32_t>>(line, "prompt_ids", where);
  }
  DI_CHECK(!(line.contains("max_tokens") && line.contains("max_new_tokens")), where,
           ": give at most one of \"max_tokens\" and \"max_new_tokens\"");
  auto& p = out.params;
  p = defaults;
  if (line.contains("priority")) out.priority = get_as<int64_t>(line, "priority", where);
  if (line.contains("temperature")) p.temperature = get_as<double>(line, "temperature", where);
  if (line.contains("top_k")) p.top_k = get_as<int64_t>(line, "top_k", where);
  if (line.contains("top_p")) p.top_p = get_as<double>(line, "top_p", where);
  if (line.contains("min_p")) p.min_p = get_as<double>(line, "min_p", where);
  if (line.contains("repetition_penalty")) {
    p.repetition_penalty = get_as<double>(line, "repetition_penalty", where);
  }
  if (line.contains("presence_penalty")) {
    p.presence_penalty = get_as<double>(line, "presence_penalty", where);
  }
  if (line.contains("frequency_penalty")) {
    p.frequency_penalty = get_as<double>(line, "frequency_penalty", where);
  }
  if (line.contains("seed")) p.seed = get_as<uint64_t>(line, "seed", where);
  if (line.contains("max_tokens")) p.max_new_tokens = get_as<int64_t>(line, "max_tokens", where);
  if (line.contains("max_new_tokens")) {
    p.max_new_tokens = get_as<int64_t>(line, "max_new_tokens", where);
  }
  if (line.contains("stop")) {
    p.stop = line.at("stop").is_string()
                 ? std::vector<std::string>{line.at("stop").get<std::string>()}
                 : get_as<std::vector<std::string>>(line, "stop", where);
  }
  if (line.contains("stop_token_ids")) {
    p.stop_token_ids = get_as<std::vector<int64_t>>(line, "stop_token_ids", where);
  }
  if (line.contains("ignore_eos")) p.ignore_eos = get_as<bool>(line, "ignore_eos", where);
  if (line.contains("n")) p.n = get_as<int64_t>(line, "n", where);
  if (line.contains("logprobs")) p.logprobs = get_as<int64_t>(line, "logprobs", where);
  return out;
}

int run_prompts_file(const Args& args) {
  DI_CHECK(!args.has("prompt") && !args.has("prompt-ids") && !args.has("dump-logits") &&
               !args.has("prefill-chunk"),
           "--prompts-file runs the engine: --prompt, --prompt-ids, --dump-logits and "
           "--prefill-chunk do not apply");
  const std::string path = args.require("prompts-file");
  // The sampling flags are every line's defaults (greedy unless they say otherwise).
  const engine::SamplingParams defaults = sampling_from_flags(args);

  // Parse every line before loading anything: a bad file fails fast and runs nothing.
  std::ifstream in(path);
  DI_CHECK(in.good(), "--prompts-file: cannot open ", path);
  std::vector<PromptLine> lines;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail(where, ": invalid JSON (", e.what(), ")");
    }
    lines.push_back(parse_prompt_line(json, defaults, where));
  }
  DI_CHECK(!lines.empty(), "--prompts-file ", path, " holds no prompts");

  config::RecipeConfig recipe = recipe_from_flags(args, true);
  apply_setting_flags(recipe, args, {"tokenizer"});
  config::ModelSetup loaded =
      config::load_model_setup(recipe, {.require_tokenizer = false, .lockstep = true});
  if (config::is_lockstep_worker(loaded)) return config::run_lockstep_worker(loaded);
  const std::string& dir = loaded.dir;
  const auto& tok = loaded.tokenizer;
  engine::Engine engine(*loaded.model, *loaded.pool, loaded.engine, tok ? &*tok : nullptr);

  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto& line = lines[i];
    const std::string where = path + " prompt " + std::to_string(i);
    if (line.has_text) {
      DI_CHECK(tok.has_value(), where, ": \"prompt\" text needs tokenizer.json in ", dir,
               "; give \"prompt_ids\" instead");
      line.ids = engine.encode(line.text);
    }
    try {
      engine.check_request(line.ids, line.params);
    } catch (const Error& e) {
      fail(where, ": ", e.what());
    }
  }

  const auto start = std::chrono::steady_clock::now();
  std::map<engine::RequestId, size_t> index_of;
  std::vector<engine::RequestResult> results(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const engine::RequestId id =
        engine.add_request(lines[i].ids, lines[i].params, lines[i].priority);
    index_of[id] = i;
    results[i].prompt_ids = lines[i].ids;
    results[i].completions.resize(static_cast<size_t>(lines[i].params.n));
  }
  while (engine.has_unfinished()) {
    for (const auto& out : engine.step()) {
      auto& r = results[index_of.at(out.id)];
      for (const auto& d : out.completions) {
        engine::accumulate(r.completions[static_cast<size_t>(d.index)], d);
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (size_t i = 0; i < results.size(); ++i) {
    const bool with_logprobs = lines[i].params.logprobs.has_value();
    nlohmann::ordered_json out;
    out["index"] = i;
    out["prompt_ids"] = results[i].prompt_ids;
    const auto first =
        completion_json(results[i].completions.front(), tok.has_value(), with_logprobs);
    for (const auto& [key, value] : first.items()) out[key] = value;
    if (results[i].completions.size() > 1) {
      out["choices"] = nlohmann::ordered_json::array();
      for (const auto& c : results[i].completions) {
        out["choices"].push_back(completion_json(c, tok.has_value(), with_logprobs));
      }
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  const auto stats = engine.stats();
  log::info(lines.size(), " prompts: ", stats.generated_tokens, " tokens generated in ", seconds,
            " s (", stats.steps, " steps, ", stats.num_preemptions, " preemptions, ",
            stats.blocks.prefix_hit_tokens, " prefix-cache hit tokens, peak ",
            stats.blocks.peak_used_blocks, " of ", stats.blocks.num_blocks, " KV blocks)");
  return 0;
}

}  // namespace deepinfer::cli
