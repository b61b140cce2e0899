#include "validate/validation.h"

#include <algorithm>

#include "core/error.h"
#include "validate/metrics.h"

namespace deepinfer::validate {

namespace {

std::span<const float> row(const std::vector<float>& logits, int64_t vocab, int64_t position) {
  return std::span<const float>(logits).subspan(static_cast<size_t>(position * vocab),
                                                static_cast<size_t>(vocab));
}

// Teacher-forced comparison of next-token rows [0, n - 1) (row n - 1 predicts past the end).
void compare_rows(const std::vector<float>& model, const std::vector<float>& reference,
                  int64_t vocab, int64_t n, ValidationReport& report, double& kl_sum) {
  for (int64_t p = 0; p + 1 < n; ++p) {
    const auto m = row(model, vocab, p);
    const auto r = row(reference, vocab, p);
    if (top1(m) == top1(r)) ++report.top1_matching;
    const double kl = kl_divergence(r, m);
    kl_sum += kl;
    report.max_kl = std::max(report.max_kl, kl);
    ++report.positions;
  }
}

void add_nll(const std::vector<float>& logits, int64_t vocab, std::span<const int32_t> tokens,
             int64_t from, int64_t begin, NllSum& sum) {
  for (auto p = from; p < static_cast<int64_t>(tokens.size()) + begin; ++p) {
    const std::vector<double> lp = log_softmax(row(logits, vocab, p - 1 - begin));
    sum.add(-lp[static_cast<size_t>(tokens[static_cast<size_t>(p - begin)])]);
  }
}

// Teacher forcing on the text too: the rows that predict the window's scored tokens.
void compare_scored(const std::vector<float>& model, const std::vector<float>& reference,
                    int64_t vocab, const PerplexityWindow& w, ValidationReport& report,
                    double& kl_sum) {
  for (int64_t p = w.score_from; p < w.end; ++p) {
    const auto m = row(model, vocab, p - 1 - w.begin);
    const auto r = row(reference, vocab, p - 1 - w.begin);
    if (top1(m) == top1(r)) ++report.top1_matching;
    const double kl = kl_divergence(r, m);
    kl_sum += kl;
    report.max_kl = std::max(report.max_kl, kl);
    ++report.positions;
  }
}

// Keeps the largest error of each block over the prompts.
void merge_blocks(std::vector<BlockError>& into, const std::vector<BlockError>& more) {
  if (into.empty()) {
    into = more;
    return;
  }
  for (const BlockError& b : more) {
    const auto it = std::find_if(into.begin(), into.end(), [&](const BlockError& e) {
      return e.layer == b.layer && e.block == b.block;
    });
    if (it == into.end()) {
      into.push_back(b);
    } else {
      it->rel_error = std::max(it->rel_error, b.rel_error);
    }
  }
}

void finish_layers(ValidationReport& report, const ValidateOptions& options) {
  report.has_layers = options.layers;
  report.tolerance = options.tolerance;
  for (const BlockError& b : report.blocks) {
    if (b.rel_error > options.tolerance) {
      report.first_exceeding = b;
      break;
    }
  }
}

int64_t resolve_window(const model::CausalLM& model, const ValidateOptions& options) {
  if (options.window > 0) return options.window;
  const int64_t max_pos = model.config().max_position_embeddings;
  return max_pos > 0 ? std::min<int64_t>(max_pos, 1024) : 1024;
}

}  // namespace

void check_comparable(const model::CausalLM& model, const model::CausalLM& reference, bool layers) {
  const auto& a = model.config();
  const auto& b = reference.config();
  DI_CHECK(a.architecture == b.architecture, "--reference is a ", b.architecture,
           " but --model is a ", a.architecture,
           ": validate compares two versions of one model (another dtype, quantization, KV cache "
           "dtype or format), not different architectures");
  DI_CHECK(a.vocab_size == b.vocab_size, "--reference has a vocabulary of ", b.vocab_size,
           " tokens but --model has ", a.vocab_size,
           ": next-token distributions cannot be compared across vocabularies");
  if (layers) {
    DI_CHECK(a.num_hidden_layers == b.num_hidden_layers && a.hidden_size == b.hidden_size,
             "--layers: --reference has ", b.num_hidden_layers, " layers of width ", b.hidden_size,
             " but --model has ", a.num_hidden_layers, " of width ", a.hidden_size);
  }
}

void check_comparable(const model::CausalLM& model, const Golden& golden, bool layers) {
  const auto& a = model.config();
  DI_CHECK(a.architecture == golden.architecture, "--golden ", golden.path, " was made from a ",
           golden.architecture, " but --model is a ", a.architecture);
  DI_CHECK(a.vocab_size == golden.vocab_size, "--golden ", golden.path, " has a vocabulary of ",
           golden.vocab_size, " tokens but --model has ", a.vocab_size);
  if (layers) {
    DI_CHECK(a.num_hidden_layers == golden.num_hidden_layers && a.hidden_size == golden.hidden_size,
             "--layers: --golden ", golden.path, " has ", golden.num_hidden_layers,
             " layers of width ", golden.hidden_size, " but --model has ", a.num_hidden_layers,
             " of width ", a.hidden_size);
  }
}

std::vector<BlockError> compare_blocks(const std::vector<LayerCapture::Entry>& model,
                                       const std::vector<LayerCapture::Entry>& reference) {
  std::vector<BlockError> out;
  for (const auto& m : model) {
    const auto r = std::find_if(reference.begin(), reference.end(), [&](const auto& e) {
      return e.layer == m.layer && e.block == m.block;
    });
    if (r == reference.end() || r->data.size() != m.data.size()) continue;
    out.push_back({m.layer, m.block, relative_error(m.data, r->data)});
  }
  return out;
}

ValidationReport compare_models(ModelProbe& model, ModelProbe& reference,
                                const std::vector<ValidationPrompt>& prompts,
                                const std::vector<int32_t>& text, const ValidateOptions& options) {
  check_comparable(model.model(), reference.model(), options.layers);
  DI_CHECK(options.max_new_tokens >= 0, "--max-new-tokens must be >= 0, got ",
           options.max_new_tokens);
  ValidationReport report;
  report.reference_kind = "model";
  report.num_prompts = static_cast<int64_t>(prompts.size());
  report.has_greedy = !prompts.empty();
  report.max_new_tokens = options.max_new_tokens;
  const int64_t vocab = model.vocab();
  double kl_sum = 0;
  for (const ValidationPrompt& p : prompts) {
    const std::vector<int32_t> ours = model.greedy(p.ids, options.max_new_tokens);
    const std::vector<int32_t> theirs = reference.greedy(p.ids, options.max_new_tokens);
    const GreedyComparison g = compare_greedy(ours, theirs);
    report.greedy_compared += g.compared;
    report.greedy_matching += g.matching;
    report.first_divergence.push_back(g.first_divergence);

    std::vector<int32_t> forced = p.ids;
    forced.insert(forced.end(), theirs.begin(), theirs.end());
    const auto n = static_cast<int64_t>(forced.size());
    const auto prefill = static_cast<int64_t>(p.ids.size());
    LayerCapture ours_blocks;
    LayerCapture theirs_blocks;
    const auto lm = model.logits(forced, prefill, options.layers ? &ours_blocks : nullptr);
    const auto lr = reference.logits(forced, prefill, options.layers ? &theirs_blocks : nullptr);
    compare_rows(lm, lr, vocab, n, report, kl_sum);
    if (options.layers) {
      merge_blocks(report.blocks, compare_blocks(ours_blocks.entries(), theirs_blocks.entries()));
    }
  }
  if (!text.empty()) {
    report.has_perplexity = true;
    report.perplexity_source = "text";
    report.window = resolve_window(model.model(), options);
    report.stride = options.stride > 0 ? options.stride : std::max<int64_t>(1, report.window / 2);
    NllSum ours;
    NllSum theirs;
    const std::span<const int32_t> all(text);
    for (const PerplexityWindow& w :
         perplexity_windows(static_cast<int64_t>(text.size()), report.window, report.stride)) {
      const auto tokens =
          all.subspan(static_cast<size_t>(w.begin), static_cast<size_t>(w.end - w.begin));
      const auto len = static_cast<int64_t>(tokens.size());
      // Without prompts, --layers compares the first window's blocks.
      const bool watch = options.layers && prompts.empty() && w.begin == 0;
      LayerCapture ours_blocks;
      LayerCapture theirs_blocks;
      const auto lm = model.logits(tokens, len, watch ? &ours_blocks : nullptr);
      const auto lr = reference.logits(tokens, len, watch ? &theirs_blocks : nullptr);
      if (watch) report.blocks = compare_blocks(ours_blocks.entries(), theirs_blocks.entries());
      add_nll(lm, vocab, tokens, w.score_from, w.begin, ours);
      add_nll(lr, vocab, tokens, w.score_from, w.begin, theirs);
      compare_scored(lm, lr, vocab, w, report, kl_sum);
    }
    report.perplexity_tokens = ours.count;
    report.perplexity_model = ours.perplexity();
    report.perplexity_reference = theirs.perplexity();
  }
  finish_layers(report, options);
  report.mean_kl = report.positions > 0 ? kl_sum / static_cast<double>(report.positions) : 0;
  return report;
}

ValidationReport compare_golden(ModelProbe& model, const Golden& golden,
                                const ValidateOptions& options) {
  check_comparable(model.model(), golden, options.layers);
  ValidationReport report;
  report.reference_kind = "golden";
  report.reference = golden.path;
  report.num_prompts = static_cast<int64_t>(golden.prompts.size());
  const int64_t vocab = model.vocab();
  double kl_sum = 0;
  NllSum ours;
  NllSum theirs;
  for (const GoldenPrompt& p : golden.prompts) {
    const auto n = static_cast<int64_t>(p.ids.size());
    LayerCapture blocks;
    const auto lm = model.logits(p.ids, n, options.layers ? &blocks : nullptr);
    compare_rows(lm, p.logits, vocab, n, report, kl_sum);
    add_nll(lm, vocab, p.ids, 1, 0, ours);
    add_nll(p.logits, vocab, p.ids, 1, 0, theirs);
    if (options.layers) merge_blocks(report.blocks, compare_blocks(blocks.entries(), p.blocks));
  }
  report.mean_kl = report.positions > 0 ? kl_sum / static_cast<double>(report.positions) : 0;
  finish_layers(report, options);
  if (ours.count > 0) {
    report.has_perplexity = true;
    report.perplexity_source = "golden prompts";
    report.perplexity_tokens = ours.count;
    report.perplexity_model = ours.perplexity();
    report.perplexity_reference = theirs.perplexity();
  }
  return report;
}

}  // namespace deepinfer::validate
