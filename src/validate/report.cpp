#include "validate/report.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace deepinfer::validate {

namespace {

double ratio(int64_t a, int64_t b) {
  return b == 0 ? 1.0 : static_cast<double>(a) / static_cast<double>(b);
}

std::string num(double v, const char* format = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string block_name(const BlockError& b) {
  return b.layer < 0 ? b.block : str_cat("layer ", b.layer, " ", b.block);
}

nlohmann::ordered_json block_json(const BlockError& b) {
  nlohmann::ordered_json j;
  j["layer"] = b.layer;
  j["block"] = b.block;
  j["rel_error"] = b.rel_error;
  return j;
}

}  // namespace

double ValidationReport::greedy_agreement() const {
  return ratio(greedy_matching, greedy_compared);
}
double ValidationReport::top1_agreement() const {
  return ratio(top1_matching, positions);
}
double ValidationReport::agreement() const {
  return has_greedy && greedy_compared > 0 ? greedy_agreement() : top1_agreement();
}

void check_bounds(ValidationReport& report, std::optional<double> max_kl,
                  std::optional<double> min_agreement) {
  report.max_kl_bound = max_kl;
  report.min_agreement_bound = min_agreement;
  report.failures.clear();
  if (max_kl && !(report.max_kl <= *max_kl)) {
    report.failures.push_back(
        str_cat("max KL ", num(report.max_kl), " exceeds --max-kl ", num(*max_kl)));
  }
  if (min_agreement && !(report.agreement() >= *min_agreement)) {
    report.failures.push_back(str_cat(report.has_greedy ? "greedy" : "top-1", " agreement ",
                                      num(report.agreement()), " is below --min-agreement ",
                                      num(*min_agreement)));
  }
}

nlohmann::ordered_json report_json(const ValidationReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["reference"] = r.reference;
  j["reference_kind"] = r.reference_kind;
  j["num_prompts"] = r.num_prompts;
  if (r.has_greedy) {
    auto& g = j["greedy"];
    g["max_new_tokens"] = r.max_new_tokens;
    g["tokens_compared"] = r.greedy_compared;
    g["tokens_matching"] = r.greedy_matching;
    g["agreement"] = r.greedy_agreement();
    g["first_divergence"] = r.first_divergence;
  }
  auto& t = j["teacher_forcing"];
  t["positions"] = r.positions;
  t["top1_agreement"] = r.top1_agreement();
  t["mean_kl"] = r.mean_kl;
  t["max_kl"] = r.max_kl;
  if (r.has_perplexity) {
    auto& p = j["perplexity"];
    p["source"] = r.perplexity_source;
    p["tokens"] = r.perplexity_tokens;
    p["window"] = r.window;
    p["stride"] = r.stride;
    p["model"] = r.perplexity_model;
    p["reference"] = r.perplexity_reference;
    p["diff"] = r.perplexity_model - r.perplexity_reference;
    p["rel_diff"] = (r.perplexity_model - r.perplexity_reference) / r.perplexity_reference;
  }
  if (r.has_layers) {
    auto& l = j["layers"];
    l["tolerance"] = r.tolerance;
    l["first_exceeding"] = r.first_exceeding ? block_json(*r.first_exceeding) : nullptr;
    auto& list = l["blocks"] = nlohmann::ordered_json::array();
    for (const auto& b : r.blocks) list.push_back(block_json(b));
  }
  auto& b = j["bounds"];
  b["max_kl"] = r.max_kl_bound ? nlohmann::ordered_json(*r.max_kl_bound) : nullptr;
  b["min_agreement"] =
      r.min_agreement_bound ? nlohmann::ordered_json(*r.min_agreement_bound) : nullptr;
  b["passed"] = r.passed();
  b["failures"] = r.failures;
  return j;
}

std::string report_table(const ValidationReport& r) {
  std::string out = str_cat("validate ", r.model, "\n    against ", r.reference_kind, " ",
                            r.reference, "\n    ", r.num_prompts, " prompts\n\n");
  const auto row = [&](const std::string& name, const std::string& value) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "  %-36s %s\n", name.c_str(), value.c_str());
    out += buf;
  };
  if (r.has_greedy) {
    row(str_cat("greedy agreement (", r.max_new_tokens, " new tokens)"),
        str_cat(num(r.greedy_agreement(), "%.4f"), "  (", r.greedy_matching, "/", r.greedy_compared,
                ")"));
    int64_t earliest = -1;
    int64_t diverged = 0;
    for (int64_t d : r.first_divergence) {
      if (d < 0) continue;
      ++diverged;
      if (earliest < 0 || d < earliest) earliest = d;
    }
    row("first divergence", diverged == 0 ? "none"
                                          : str_cat("token ", earliest, " (", diverged, " of ",
                                                    r.num_prompts, " prompts diverge)"));
  }
  row("top-1 agreement (teacher forcing)",
      str_cat(num(r.top1_agreement(), "%.4f"), "  (", r.top1_matching, "/", r.positions, ")"));
  row("KL(reference || model) mean / max", str_cat(num(r.mean_kl), " / ", num(r.max_kl)));
  if (r.has_perplexity) {
    row("perplexity on", r.perplexity_source);
    row("perplexity", str_cat("model ", num(r.perplexity_model, "%.6f"), "  reference ",
                              num(r.perplexity_reference, "%.6f"), "  diff ",
                              num(r.perplexity_model - r.perplexity_reference, "%.3g")));
    row(r.window > 0 ? "  tokens / window / stride" : "  tokens",
        r.window > 0 ? str_cat(r.perplexity_tokens, " / ", r.window, " / ", r.stride)
                     : str_cat(r.perplexity_tokens));
  }
  if (r.has_layers) {
    out += str_cat("\n  block outputs, relative error (tolerance ", num(r.tolerance), "):\n");
    for (const auto& b : r.blocks) {
      char buf[256];
      std::snprintf(buf, sizeof(buf), "    %-32s %.3e%s\n", block_name(b).c_str(), b.rel_error,
                    b.rel_error > r.tolerance ? "  > tolerance" : "");
      out += buf;
    }
    out += r.blocks.empty() ? std::string("  nothing to compare (no prompts or text)\n")
           : r.first_exceeding
               ? str_cat("  first block over tolerance: ", block_name(*r.first_exceeding), " (",
                         num(r.first_exceeding->rel_error, "%.3e"), ")\n")
               : std::string("  every block within tolerance\n");
  }
  out += "\n";
  if (r.failures.empty()) {
    out += r.max_kl_bound || r.min_agreement_bound ? "PASS\n" : "";
  } else {
    for (const auto& f : r.failures) out += "FAIL: " + f + "\n";
  }
  return out;
}

}  // namespace deepinfer::validate
