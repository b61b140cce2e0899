#include "cli/bench/options.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace deepinfer::cli::bench {
namespace {

// The spellings of one setting: the first is the name used in messages.
const std::vector<std::vector<std::string>> kSynonyms = {
    {"num-prompts", "num_samples", "num-samples"},
    {"dataset-path", "dataset"},
    {"warmup", "num-warmups", "num_warmup"},
    {"input-len", "input_len", "random-input-len"},
    {"output-len", "output_len", "random-output-len"},
    {"request-rate", "request_rate"},
    {"max-concurrency", "max_concurrency"},
    {"dataset-name", "dataset_name"},
};

const std::set<std::string> kMultiValueFlags = {"goodput"};

// The one value given under any spelling of `names`; an error when two spellings disagree.
std::optional<std::string> get_any(const Args& args, const std::vector<std::string>& names) {
  std::optional<std::string> value;
  std::string first;
  for (const auto& name : names) {
    const auto v = args.get(name);
    if (!v) continue;
    DI_CHECK(!value || *value == *v, "--", first, " and --", name, " are the same setting: give ",
             "one of them");
    value = v;
    first = name;
  }
  return value;
}

std::optional<int64_t> get_int_any(const Args& args, const std::vector<std::string>& names,
                                   int64_t min) {
  const auto text = get_any(args, names);
  if (!text) return std::nullopt;
  const int64_t value = parse_int(*text, "--" + names.front());
  DI_CHECK(value >= min, "--", names.front(), " must be >= ", min, ", got ", value);
  return value;
}

const std::vector<std::string>& synonyms_of(const std::string& name) {
  for (const auto& names : kSynonyms) {
    if (names.front() == name) return names;
  }
  static const std::vector<std::string> none;
  return none;
}

double parse_rate(const std::string& text) {
  if (text == "inf" || text == "infinity") return std::numeric_limits<double>::infinity();
  const double rate = parse_double(text, "--request-rate");
  DI_CHECK(rate > 0 && std::isfinite(rate), "--request-rate: expected a rate > 0 or inf, got '",
           text, "'");
  return rate;
}

void read_goodput(BenchOptions& o, const std::string& spec) {
  // "ttft:500,tpot:50" (joined from vLLM's separate words).
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string item = spec.substr(start, comma - start);
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    DI_CHECK(colon != std::string::npos, "--goodput ", item,
             ": expected NAME:MILLISECONDS with NAME ttft, tpot or e2el");
    const std::string name = item.substr(0, colon);
    const double ms = parse_double(item.substr(colon + 1), "--goodput " + name);
    DI_CHECK(ms > 0, "--goodput ", name, ": the objective must be > 0 ms");
    if (name == "ttft") {
      o.slo_ttft_ms = ms;
    } else if (name == "tpot") {
      o.slo_tpot_ms = ms;
    } else if (name == "e2el") {
      o.slo_e2el_ms = ms;
    } else {
      fail("--goodput ", name, ": expected ttft, tpot or e2el");
    }
  }
}

}  // namespace

std::set<std::string> bench_value_flags() {
  std::set<std::string> flags = {"mode",
                                 "config",
                                 "seed",
                                 "duration",
                                 "goodput",
                                 "slo-ttft-ms",
                                 "slo-tpot-ms",
                                 "slo-e2el-ms",
                                 "result-filename",
                                 "result-dir",
                                 "plot",
                                 "base-url",
                                 "served-model-name",
                                 "request-timeout",
                                 "max-waiting-requests",
                                 "http-threads",
                                 "api-key"};
  for (const auto& names : kSynonyms) flags.insert(names.begin(), names.end());
  return flags;
}

std::set<std::string> bench_bool_flags() {
  return {"json", "save-result", "baseline-single"};
}

std::vector<std::string> join_multi_value_flags(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    out.push_back(argv[i]);
    if (argv[i].rfind("--", 0) != 0 || !kMultiValueFlags.count(argv[i].substr(2))) continue;
    std::string joined;
    while (i + 1 < argv.size() && argv[i + 1].rfind("-", 0) != 0) {
      joined += (joined.empty() ? "" : ",") + argv[++i];
    }
    if (!joined.empty()) out.push_back(joined);
  }
  return out;
}

BenchOptions read_bench_options(const Args& args) {
  BenchOptions o;
  o.mode = args.get_or("mode", "offline");
  DI_CHECK(o.mode == "offline" || o.mode == "online", "--mode: expected offline or online, got '",
           o.mode, "'");
  o.dataset_path = get_any(args, synonyms_of("dataset-path"));
  const auto name = get_any(args, synonyms_of("dataset-name"));
  o.dataset_name = name.value_or(o.dataset_path ? "auto" : "random");
  DI_CHECK(o.dataset_name == "random" || o.dataset_name == "sharegpt" || o.dataset_name == "auto" ||
               o.dataset_name == "custom",
           "--dataset-name ", o.dataset_name, ": expected random, sharegpt or auto");
  DI_CHECK(o.dataset_name == "random" || o.dataset_path, "--dataset-name ", o.dataset_name,
           " reads a file: give --dataset-path FILE (or --dataset FILE)");
  DI_CHECK(o.dataset_name != "random" || !o.dataset_path,
           "--dataset-name random makes its own prompts: drop --dataset-path, or name the "
           "file's format (sharegpt or auto)");

  o.input_len = get_int_any(args, synonyms_of("input-len"), 1);
  o.output_len = get_int_any(args, synonyms_of("output-len"), 1);
  o.warmup = get_int_any(args, synonyms_of("warmup"), 0).value_or(0);
  o.seed = static_cast<uint64_t>(args.get_int("seed", 0));
  o.duration_s = args.get_double("duration", 0);
  DI_CHECK(o.duration_s >= 0, "--duration must be >= 0 seconds");
  const auto samples = get_int_any(args, synonyms_of("num-prompts"), 1);
  DI_CHECK(samples || o.duration_s > 0,
           "give the number of requests: --num_samples N (or --num-prompts N), or --duration S");
  o.num_samples = samples.value_or(0);
  if (o.dataset_name == "random") {
    DI_CHECK(o.input_len, "random prompts need --input-len L (or give --dataset FILE)");
  }

  if (const auto rates = get_any(args, synonyms_of("request-rate"))) {
    size_t start = 0;
    while (start <= rates->size()) {
      const size_t comma = rates->find(',', start);
      o.request_rates.push_back(parse_rate(rates->substr(start, comma - start)));
      start = comma == std::string::npos ? rates->size() + 1 : comma + 1;
    }
  } else {
    o.request_rates = {std::numeric_limits<double>::infinity()};
  }
  o.max_concurrency = get_int_any(args, synonyms_of("max-concurrency"), 1).value_or(0);
  if (o.duration_s > 0 && o.num_samples == 0 && o.max_concurrency == 0) {
    for (double rate : o.request_rates) {
      DI_CHECK(!std::isinf(rate),
               "--duration without --num_samples sends for that long: give a "
               "finite --request-rate or a --max-concurrency (at rate inf it would send without "
               "pause)");
    }
  }

  if (const auto g = args.get("goodput")) read_goodput(o, *g);
  for (const auto& [flag, slot] :
       {std::pair{"slo-ttft-ms", &o.slo_ttft_ms}, std::pair{"slo-tpot-ms", &o.slo_tpot_ms},
        std::pair{"slo-e2el-ms", &o.slo_e2el_ms}}) {
    if (!args.has(flag)) continue;
    DI_CHECK(!*slot, "--", flag, " and --goodput both set that objective: give one");
    *slot = args.get_double(flag, 0);
    DI_CHECK(**slot > 0, "--", flag, " must be > 0");
  }

  o.json = args.flag("json");
  o.save_result = args.flag("save-result");
  o.result_filename = args.get_or("result-filename", "");
  o.result_dir = args.get_or("result-dir", "");
  if (!o.result_filename.empty() || !o.result_dir.empty()) o.save_result = true;
  o.plot = args.get_or("plot", "");
  o.baseline_single = args.flag("baseline-single");

  o.base_url = args.get_or("base-url", "");
  o.served_model_name = args.get_or("served-model-name", "");
  o.request_timeout_s = args.get_double("request-timeout", 600);
  DI_CHECK(o.request_timeout_s > 0, "--request-timeout must be > 0 seconds");
  if (o.mode == "offline") {
    for (const char* flag :
         {"base-url", "max-waiting-requests", "http-threads", "api-key", "request-timeout"}) {
      DI_CHECK(!args.has(flag), "--", flag, " applies to --mode online");
    }
  } else {
    DI_CHECK(!o.baseline_single, "--baseline-single applies to --mode offline");
    if (!o.base_url.empty()) {
      DI_CHECK(!args.has("max-waiting-requests") && !args.has("http-threads"),
               "--max-waiting-requests and --http-threads configure the server bench starts; "
               "with --base-url, set them on that server");
    }
  }
  return o;
}

}  // namespace deepinfer::cli::bench
