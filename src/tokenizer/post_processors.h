#pragma once
// tokenizer.json "post_processor" for single sequences: which special tokens surround the
// ids when add_special_tokens is set (TemplateProcessing, Bert, Roberta; ByteLevel only
// trims offsets, which the engine does not track, so it adds nothing).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

class PostProcessor {
 public:
  // The single-sequence template: ids before and after the sequence.
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;

  void apply(std::vector<int32_t>& ids) const {
    if (!prefix.empty()) ids.insert(ids.begin(), prefix.begin(), prefix.end());
    ids.insert(ids.end(), suffix.begin(), suffix.end());
  }
  bool empty() const { return prefix.empty() && suffix.empty(); }
};

// Supported: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence.
// nullptr for JSON null.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& json,
                                                   const std::string& source);

}  // namespace deepinfer::tokenizer
