#pragma once
// Stop strings on streamed text. Text arrives in pieces (one per token, from the streaming
// detokenizer, so always whole UTF-8 characters); a stop string may straddle pieces. The
// filter streams out only text that can no longer turn into the start of a stop string, and
// when a stop string appears it cuts the text just before it: the stop string itself is
// never emitted.
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::engine {

class StopTextFilter {
 public:
  explicit StopTextFilter(std::vector<std::string> stops);

  // Appends a piece; returns the newly safe text. Once stopped() nothing more is accepted.
  std::string push(std::string_view piece);
  // No more pieces will come: returns whatever was held back (unless stopped).
  std::string finish();

  bool stopped() const { return stopped_; }
  const std::string& matched_stop() const { return matched_; }
  // All text so far, without the stop string and what followed it.
  const std::string& text() const { return text_; }

 private:
  // Length of the longest suffix of text_ that is a proper prefix of some stop string.
  size_t held_back() const;

  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace deepinfer::engine
