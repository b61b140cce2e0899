#pragma once
// The comparisons of deepinfer validate, as plain functions of logits and token lists: next-token
// KL divergence, top-1 agreement, greedy agreement and first divergence, sliding-window
// perplexity (Hugging Face's recipe), and relative error of activations.
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::validate {

// log_softmax of one row of logits, in double.
std::vector<double> log_softmax(std::span<const float> logits);

// KL(P || Q) in nats of the next-token distributions softmax(p_logits), softmax(q_logits);
// P is the reference. 0 for identical rows.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// Index of the largest value; ties to the lowest index (as torch.argmax).
int64_t top1(std::span<const float> logits);

struct GreedyComparison {
  int64_t compared = 0;  // positions compared: the longer of the two outputs
  int64_t matching = 0;  // positions where both produced the same token
  // First position where the outputs differ (a missing token counts), -1 when identical.
  int64_t first_divergence = -1;
};
GreedyComparison compare_greedy(std::span<const int32_t> model, std::span<const int32_t> reference);

// Sliding-window perplexity as in Hugging Face's "Perplexity of fixed-length models": windows of
// `window` tokens start every `stride` tokens; each window scores only the tokens the previous
// one did not, with the window's earlier tokens as context. The first token is never scored.
struct PerplexityWindow {
  int64_t begin = 0;       // first token of the window (context starts here)
  int64_t end = 0;         // one past its last token
  int64_t score_from = 0;  // first token scored in it (> begin)
};
// Throws Error when window < 2 or stride < 1 or stride > window.
std::vector<PerplexityWindow> perplexity_windows(int64_t num_tokens, int64_t window,
                                                 int64_t stride);

// Accumulates -log p(token) and reports exp(mean).
struct NllSum {
  double total = 0;
  int64_t count = 0;
  void add(double nll) {
    total += nll;
    ++count;
  }
  double perplexity() const;
};

// ||a - b|| / ||b|| (0 when both are zero; infinite when only b is zero).
double relative_error(std::span<const float> a, std::span<const float> b);

}  // namespace deepinfer::validate
