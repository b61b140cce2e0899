#include "cli/bench/results.h"

#include <cmath>
#include <cstring>
#include <map>

#include "bench/statistics.h"
#include "core/error.h"

namespace deepinfer::cli::bench {
namespace {

using deepinfer::bench::Distribution;
using deepinfer::bench::summarize;

Json distribution_json(const std::vector<double>& values) {
  const Distribution d = summarize(values);
  return {{"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}};
}

bool meets_slos(const RequestRecord& r, const BenchOptions& o) {
  return (!o.slo_ttft_ms || r.ttft_ms <= *o.slo_ttft_ms) &&
         (!o.slo_tpot_ms || r.tpot_ms() <= *o.slo_tpot_ms) &&
         (!o.slo_e2el_ms || r.e2e_ms <= *o.slo_e2el_ms);
}

Json record_json(const RequestRecord& r) {
  Json j;
  j["index"] = r.index;
  j["sent_s"] = r.sent_s;
  j["status"] = r.completed ? "completed" : "failed";
  if (!r.completed) {
    j["reason"] = r.reason;
    j["error"] = r.error;
  }
  if (r.http_status) j["http_status"] = r.http_status;
  j["prompt_tokens"] = r.prompt_tokens;
  j["output_tokens"] = r.output_tokens;
  if (r.completed) {
    j["ttft_ms"] = r.ttft_ms;
    j["tpot_ms"] = r.tpot_ms();
    j["e2e_ms"] = r.e2e_ms;
    j["itl_ms"] = r.itl_ms;
  }
  return j;
}

}  // namespace

std::string rate_text(double rate) {
  if (std::isinf(rate)) return "inf";
  std::string s = str_cat(rate);
  return s;
}

Json run_json(const RunResult& run, const BenchOptions& o, const Json& header) {
  Json out = header;
  out["request_rate"] = std::isinf(run.request_rate) ? Json("inf") : Json(run.request_rate);
  out["max_concurrency"] = o.max_concurrency > 0 ? Json(o.max_concurrency) : Json(nullptr);
  out["warmup_requests"] = o.warmup;

  std::vector<double> ttft, tpot, itl, e2e;
  int64_t completed = 0, good = 0, input_tokens = 0, output_tokens = 0;
  std::map<std::string, int64_t> reasons;
  for (const auto& r : run.records) {
    if (!r.completed) {
      ++reasons[r.reason];
      continue;
    }
    ++completed;
    input_tokens += r.prompt_tokens;
    output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_ms);
    if (r.output_tokens > 1) tpot.push_back(r.tpot_ms());
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    e2e.push_back(r.e2e_ms);
    if (meets_slos(r, o)) ++good;
  }
  const auto sent = static_cast<int64_t>(run.records.size());
  out["sent"] = sent;
  out["completed"] = completed;
  out["failed"] = sent - completed;
  out["failure_reasons"] = Json::object();
  for (const auto& [reason, count] : reasons) out["failure_reasons"][reason] = count;

  const double seconds = run.elapsed_s > 0 ? run.elapsed_s : 1e-9;
  out["elapsed_s"] = run.elapsed_s;
  out["total_input_tokens"] = input_tokens;
  out["total_output_tokens"] = output_tokens;
  out["requests_per_s"] = static_cast<double>(completed) / seconds;
  out["input_tokens_per_s"] = static_cast<double>(input_tokens) / seconds;
  out["output_tokens_per_s"] = static_cast<double>(output_tokens) / seconds;
  out["total_tokens_per_s"] = static_cast<double>(input_tokens + output_tokens) / seconds;
  out["ttft_ms"] = distribution_json(ttft);
  out["tpot_ms"] = distribution_json(tpot);
  out["itl_ms"] = distribution_json(itl);
  out["e2e_latency_ms"] = distribution_json(e2e);
  Json slo = Json::object();
  if (o.slo_ttft_ms) slo["ttft_ms"] = *o.slo_ttft_ms;
  if (o.slo_tpot_ms) slo["tpot_ms"] = *o.slo_tpot_ms;
  if (o.slo_e2el_ms) slo["e2el_ms"] = *o.slo_e2el_ms;
  if (slo.empty()) {
    out["slo"] = nullptr;
    out["goodput_requests_per_s"] = nullptr;
  } else {
    out["slo"] = slo;
    out["good_requests"] = good;
    out["goodput_requests_per_s"] = static_cast<double>(good) / seconds;
  }
  for (const auto& [key, value] : run.resources.items()) out[key] = value;
  Json records = Json::array();
  for (const auto& r : run.records) records.push_back(record_json(r));
  out["requests"] = std::move(records);
  return out;
}

void print_table(const Json& run, std::FILE* out) {
  const auto line = [&](const char* label, const Json& value) {
    if (value.is_number_float()) {
      std::fprintf(out, "%-40s %.2f\n", label, value.get<double>());
    } else if (value.is_string()) {
      std::fprintf(out, "%-40s %s\n", label, value.get<std::string>().c_str());
    } else if (!value.is_null()) {
      std::fprintf(out, "%-40s %s\n", label, value.dump().c_str());
    }
  };
  const auto rule = [&](const char* title) {
    const int width = 50, left = (width - static_cast<int>(std::strlen(title)) - 2) / 2;
    std::fprintf(
        out, "%s %s %s\n", std::string(static_cast<size_t>(left), '-').c_str(), title,
        std::string(static_cast<size_t>(width - left - 2 - std::strlen(title)), '-').c_str());
  };
  std::fprintf(out, "%s\n", std::string(50, '=').c_str());
  line("Mode:", run["mode"]);
  line("Model:", run["model"]);
  line("Dataset:", run["dataset"]);
  line("Request rate (req/s):", run["request_rate"]);
  line("Max concurrency:", run["max_concurrency"]);
  line("Warm-up requests (excluded):", run["warmup_requests"]);
  line("Requests sent:", run["sent"]);
  line("Successful requests:", run["completed"]);
  line("Failed requests:", run["failed"]);
  for (const auto& [reason, count] : run["failure_reasons"].items()) {
    line(("  failed: " + reason).c_str(), count);
  }
  line("Benchmark duration (s):", run["elapsed_s"]);
  line("Total input tokens:", run["total_input_tokens"]);
  line("Total generated tokens:", run["total_output_tokens"]);
  line("Request throughput (req/s):", run["requests_per_s"]);
  if (!run["goodput_requests_per_s"].is_null()) {
    line("Request goodput (req/s):", run["goodput_requests_per_s"]);
  }
  line("Input token throughput (tok/s):", run["input_tokens_per_s"]);
  line("Output token throughput (tok/s):", run["output_tokens_per_s"]);
  line("Total token throughput (tok/s):", run["total_tokens_per_s"]);
  struct Section {
    const char* key;
    const char* title;
    const char* name;
  };
  const Section sections[] = {{"ttft_ms", "Time to First Token", "TTFT"},
                              {"tpot_ms", "Time per Output Token", "TPOT"},
                              {"itl_ms", "Inter-token Latency", "ITL"},
                              {"e2e_latency_ms", "End-to-end Latency", "E2EL"}};
  const std::pair<const char*, const char*> stats[] = {
      {"mean", "Mean"}, {"p50", "Median"}, {"p90", "P90"}, {"p99", "P99"}};
  for (const auto& section : sections) {
    rule(section.title);
    for (const auto& [stat, label] : stats) {
      line(str_cat(label, " ", section.name, " (ms):").c_str(), run[section.key][stat]);
    }
  }
  rule("Resources");
  line("Peak RSS (MiB):", run.value("peak_rss_mb", Json(nullptr)));
  line("Peak KV blocks used:", run.value("peak_kv_blocks", Json(nullptr)));
  line("KV blocks in the pool:", run.value("kv_blocks", Json(nullptr)));
  line("Peak KV cache usage (fraction):", run.value("peak_kv_cache_usage", Json(nullptr)));
  line("Preemptions:", run.value("preemptions", Json(nullptr)));
  std::fprintf(out, "%s\n", std::string(50, '=').c_str());
}

}  // namespace deepinfer::cli::bench
