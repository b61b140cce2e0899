#pragma once
// The result of deepinfer validate: what was compared, the metrics, the bounds it was held to;
// as JSON (for scripts) and as a table (for people).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::validate {

struct BlockError {
  int64_t layer = 0;  // -1: embedding / final norm
  std::string block;
  double rel_error = 0;  // the largest over the prompts
};

struct ValidationReport {
  std::string model;
  std::string reference;       // a model path or a golden file
  std::string reference_kind;  // "model" | "golden"
  int64_t num_prompts = 0;

  // Greedy continuations of every prompt (reference models only).
  bool has_greedy = false;
  int64_t max_new_tokens = 0;
  int64_t greedy_compared = 0;
  int64_t greedy_matching = 0;
  std::vector<int64_t> first_divergence;  // per prompt, -1: identical

  // Teacher forcing: both models read the same tokens (prompt + the reference's continuation).
  int64_t positions = 0;
  int64_t top1_matching = 0;
  double mean_kl = 0;  // KL(reference || model), nats
  double max_kl = 0;

  // Perplexity of both on the text (reference models) or on the golden prompts.
  bool has_perplexity = false;
  std::string perplexity_source;
  int64_t perplexity_tokens = 0;  // tokens scored
  int64_t window = 0;
  int64_t stride = 0;
  double perplexity_model = 0;
  double perplexity_reference = 0;

  // --layers: relative error of every block output, in forward order.
  bool has_layers = false;
  double tolerance = 0;
  std::vector<BlockError> blocks;
  std::optional<BlockError> first_exceeding;

  // Bounds (--max-kl, --min-agreement) and what failed them.
  std::optional<double> max_kl_bound;
  std::optional<double> min_agreement_bound;
  std::vector<std::string> failures;

  double greedy_agreement() const;
  double top1_agreement() const;
  // Greedy agreement when greedy ran, else top-1 agreement: what --min-agreement bounds.
  double agreement() const;
  bool passed() const { return failures.empty(); }
};

// Sets the bounds and fills `failures`.
void check_bounds(ValidationReport& report, std::optional<double> max_kl,
                  std::optional<double> min_agreement);

nlohmann::ordered_json report_json(const ValidationReport& report);
std::string report_table(const ValidationReport& report);

}  // namespace deepinfer::validate
