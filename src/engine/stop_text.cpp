#include "engine/stop_text.h"

#include <algorithm>

namespace deepinfer::engine {

StopTextFilter::StopTextFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) longest_stop_ = std::max(longest_stop_, s.size());
}

std::string StopTextFilter::push(std::string_view piece) {
  if (stopped_ || piece.empty()) return {};
  const size_t old_size = text_.size();
  text_.append(piece);
  if (!stops_.empty()) {
    // Only a match ending inside the new piece is new: look back longest_stop_ - 1 bytes.
    const size_t from = old_size >= longest_stop_ ? old_size - (longest_stop_ - 1) : 0;
    size_t best = std::string::npos;
    for (const auto& s : stops_) {
      const size_t at = text_.find(s, from);
      if (at < best) {
        best = at;
        matched_ = s;
      }
    }
    if (best != std::string::npos) {
      text_.resize(best);
      stopped_ = true;
      std::string out = text_.substr(std::min(emitted_, text_.size()));
      emitted_ = text_.size();
      return out;
    }
  }
  const size_t safe = text_.size() - held_back();
  if (safe <= emitted_) return {};
  std::string out = text_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  return out;
}

std::string StopTextFilter::finish() {
  if (emitted_ >= text_.size()) return {};
  std::string out = text_.substr(emitted_);
  emitted_ = text_.size();
  return out;
}

size_t StopTextFilter::held_back() const {
  size_t held = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, text_.size()); k > held; --k) {
      if (std::string_view(text_).substr(text_.size() - k) == std::string_view(s).substr(0, k)) {
        held = k;
        break;
      }
    }
  }
  return held;
}

}  // namespace deepinfer::engine
