#pragma once
// Internal to src/config: one typed setter per meaning ("block size", "expert parallel
// size", ...). The JSON trio, the YAML layout and the flat overrides all map their key names
// onto these, so a meaning is validated and explained in one place whatever spelled it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/recipe_config.h"

namespace deepinfer::config {

// How a value joins the config: `merge` (config files: the same key set twice with
// different values is an error) or `replace` (overrides win).
enum class Mode { merge, replace };

// A value being read, with where it came from. Typed accessors throw ConfigError
// "<origin>: expected an integer, got ...". With `from_text`, a string is parsed as the
// wanted type (command-line flags).
class Value {
 public:
  Value(const nlohmann::json& json, std::string origin, bool from_text = false,
        std::string key = "")
      : json_(json), origin_(std::move(origin)), key_(std::move(key)), from_text_(from_text) {}

  const nlohmann::json& json() const { return json_; }
  const std::string& origin() const { return origin_; }
  const std::string& key() const { return key_; }  // the key as spelled, without its section
  std::string shown() const;                       // the value as written, for messages

  int64_t integer() const;
  int64_t positive() const;
  double number() const;
  bool boolean() const;
  std::string string() const;
  std::vector<int64_t> int_list() const;  // a list, or "0,1,2" from text

  // Throws ConfigError "<origin> = <value>: <why>".
  template <typename... Parts>
  [[noreturn]] void reject(Parts&&... why) const {
    throw ConfigError(str_cat(origin_, " = ", shown(), ": ", std::forward<Parts>(why)...));
  }

 private:
  const nlohmann::json& json_;
  std::string origin_;
  std::string key_;
  bool from_text_;
};

using Setter = void (*)(RecipeConfig&, const Value&, Mode);

// The places a key can be spelled: the articles' JSON trio (infer_config.json in sections,
// ep_config.json and model_config.json flat), the public repository's YAML (in sections) and
// the flat overrides (flags, keyword arguments).
enum class Format { infer_config, ep_config, model_config, yaml, override };

// Reads a whole parsed file (JSON, or YAML turned into the same tree) of `format` through the
// one key table (recipe_table.cpp): every key is honoured by its setter or rejected with a
// ConfigError naming "<source>: <section>.<key>". Nulls count as absent.
void read_layout(RecipeConfig& config, const nlohmann::json& tree, Format format,
                 const std::string& source);

// The setter an override key maps to; nullptr when the key is unknown.
Setter override_setter(const std::string& key);

// The setters.
namespace set {
void model_path(RecipeConfig&, const Value&, Mode);
void model_name(RecipeConfig&, const Value&, Mode);
void precision_mode(RecipeConfig&, const Value&, Mode);
void quantization(RecipeConfig&, const Value&, Mode);
void quantize_lm_head(RecipeConfig&, const Value&, Mode);
void matmul_precision(RecipeConfig&, const Value&, Mode);
void atb_attention(RecipeConfig&, const Value&, Mode);
void atb_moe(RecipeConfig&, const Value&, Mode);
void tensor_parallel_size(RecipeConfig&, const Value&, Mode);
void pipeline_parallel_size(RecipeConfig&, const Value&, Mode);
void expert_parallel_size(RecipeConfig&, const Value&, Mode);
void data_parallel_size(RecipeConfig&, const Value&, Mode);
void num_micro_batches(RecipeConfig&, const Value&, Mode);
void attn_tp_size(RecipeConfig&, const Value&, Mode);
void moe_tp_size(RecipeConfig&, const Value&, Mode);
void world_size(RecipeConfig&, const Value&, Mode);
void yaml_tp_size(RecipeConfig&, const Value&, Mode);  // attn/moe/embed/... tp and cp sizes
void devices(RecipeConfig&, const Value&, Mode);
void threads(RecipeConfig&, const Value&, Mode);
void mlock(RecipeConfig&, const Value&, Mode);
void mmap(RecipeConfig&, const Value&, Mode);
void transparent_huge_pages(RecipeConfig&, const Value&, Mode);
void numa(RecipeConfig&, const Value&, Mode);
void cpu_mask(RecipeConfig&, const Value&, Mode);
void cpu_strict(RecipeConfig&, const Value&, Mode);
void use_paged_attention(RecipeConfig&, const Value&, Mode);
void block_size(RecipeConfig&, const Value&, Mode);
void max_num_blocks(RecipeConfig&, const Value&, Mode);
void kv_cache_memory(RecipeConfig&, const Value&, Mode);
void mem_fraction_static(RecipeConfig&, const Value&, Mode);
void kv_cache_dtype(RecipeConfig&, const Value&, Mode);
void enable_kv_cache_quant(RecipeConfig&, const Value&, Mode);
void max_num_seqs(RecipeConfig&, const Value&, Mode);
void max_model_len(RecipeConfig&, const Value&, Mode);
void allow_long_max_model_len(RecipeConfig&, const Value&, Mode);
void tokenizer_path(RecipeConfig&, const Value&, Mode);
void chat_template(RecipeConfig&, const Value&, Mode);
void max_num_batched_tokens(RecipeConfig&, const Value&, Mode);
void max_prompt_len(RecipeConfig&, const Value&, Mode);
void enable_prefix_caching(RecipeConfig&, const Value&, Mode);
void scheduling_policy(RecipeConfig&, const Value&, Mode);
void do_sample(RecipeConfig&, const Value&, Mode);
void temperature(RecipeConfig&, const Value&, Mode);
void top_p(RecipeConfig&, const Value&, Mode);
void top_k(RecipeConfig&, const Value&, Mode);
void repetition_penalty(RecipeConfig&, const Value&, Mode);
void max_new_tokens(RecipeConfig&, const Value&, Mode);
void seed(RecipeConfig&, const Value&, Mode);
// ep_config.json
void num_experts(RecipeConfig&, const Value&, Mode);
void experts_top_k(RecipeConfig&, const Value&, Mode);
void capacity_factor(RecipeConfig&, const Value&, Mode);
void expert_parallel_mode(RecipeConfig&, const Value&, Mode);
void communication_dtype(RecipeConfig&, const Value&, Mode);
// YAML model_config / data_config switches this build accepts only at their default.
void exe_mode(RecipeConfig&, const Value&, Mode);
void next_n(RecipeConfig&, const Value&, Mode);
void force_eplb(RecipeConfig&, const Value&, Mode);
void num_redundant_experts(RecipeConfig&, const Value&, Mode);
void eplb_window(RecipeConfig&, const Value&, Mode);
void eplb_interval(RecipeConfig&, const Value&, Mode);
void eplb_load_file(RecipeConfig&, const Value&, Mode);
void eplb_record(RecipeConfig&, const Value&, Mode);
void eplb_config(RecipeConfig&, const Value&, Mode);
void enable_profiler(RecipeConfig&, const Value&, Mode);
void with_ckpt(RecipeConfig&, const Value&, Mode);
void dataset(RecipeConfig&, const Value&, Mode);
// infer_config.json model.* architecture keys, checked against config.json under the same key.
void expect_integer(RecipeConfig&, const Value&, Mode);
void expect_number(RecipeConfig&, const Value&, Mode);
void expect_string(RecipeConfig&, const Value&, Mode);
}  // namespace set

}  // namespace deepinfer::config
