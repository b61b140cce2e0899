// The one key table: every meaning (a setter of recipe_keys.h) with each way the recipe
// formats and the overrides spell it, and the one walk that applies a parsed file through it.
// JSON and YAML differ only in how their text becomes a tree (recipe_load.cpp,
// recipe_yaml.cpp); sections, keys, unknown-key errors and their origins are decided here.
#include <map>
#include <set>

#include "config/recipe_keys.h"

namespace deepinfer::config {
namespace {

struct Spelling {
  Format format;
  const char* path;  // "section.key" in infer_config / yaml, "key" in the flat formats
};

struct Meaning {
  Setter set;
  std::vector<Spelling> spellings;
};

constexpr Format J = Format::infer_config;
constexpr Format E = Format::ep_config;
constexpr Format M = Format::model_config;
constexpr Format Y = Format::yaml;
constexpr Format O = Format::override;

// Row order is the order keys of one section are applied in (kv_cache_dtype before
// enable_kv_cache_quant, whose conflict check reads it) and listed in errors.
const std::vector<Meaning>& meanings() {
  static const std::vector<Meaning> rows = {
      // Model and weights.
      {set::model_path,
       {{J, "model.model_path"}, {Y, "model_config.model_path"}, {O, "model_path"}, {O, "model"}}},
      {set::expect_string, {{J, "model.model_type"}}},
      {set::expect_integer,
       {{J, "model.vocab_size"},
        {J, "model.hidden_size"},
        {J, "model.intermediate_size"},
        {J, "model.num_hidden_layers"},
        {J, "model.num_attention_heads"},
        {J, "model.num_key_value_heads"},
        {J, "model.max_position_embeddings"}}},
      {set::expect_number, {{J, "model.rope_theta"}}},
      {set::model_name,
       {{Y, "model_config.model_name"}, {O, "model_name"}, {O, "served_model_name"}}},
      {set::exe_mode, {{Y, "model_config.exe_mode"}, {O, "exe_mode"}}},
      {set::next_n, {{Y, "model_config.next_n"}}},
      {set::force_eplb, {{Y, "model_config.force_eplb"}, {O, "enable_eplb"}}},
      {set::enable_profiler, {{Y, "model_config.enable_profiler"}}},
      {set::with_ckpt, {{Y, "model_config.with_ckpt"}}},
      {set::precision_mode, {{J, "atb.precision_mode"}, {O, "precision_mode"}, {O, "dtype"}}},
      {set::quantization,
       {{J, "model.quantization"},
        {M, "quantization"},
        {Y, "model_config.quantization"},
        {O, "quantization"}}},
      {set::quantize_lm_head,
       {{J, "model.quantize_lm_head"},
        {M, "quantize_lm_head"},
        {Y, "model_config.quantize_lm_head"},
        {O, "quantize_lm_head"}}},
      {set::matmul_precision, {{J, "atb.matmul_precision"}, {O, "matmul_precision"}}},
      {set::atb_attention, {{J, "atb.enable_atb_attention"}, {O, "enable_atb_attention"}}},
      {set::atb_moe, {{J, "atb.enable_atb_moe"}, {O, "enable_atb_moe"}}},
      {set::tokenizer_path, {{O, "tokenizer"}, {O, "tokenizer_path"}}},
      {set::chat_template, {{O, "chat_template"}}},
      // Parallel layout.
      {set::world_size, {{Y, "parallel_config.world_size"}, {O, "world_size"}}},
      {set::tensor_parallel_size,
       {{J, "parallel.tensor_parallel_size"}, {O, "tensor_parallel_size"}}},
      {set::pipeline_parallel_size,
       {{J, "parallel.pipeline_parallel_size"}, {O, "pipeline_parallel_size"}}},
      {set::expert_parallel_size,
       {{J, "parallel.expert_parallel_size"},
        {E, "ep_size"},
        {O, "expert_parallel_size"},
        {O, "ep_size"}}},
      {set::data_parallel_size, {{J, "parallel.data_parallel_size"}, {O, "data_parallel_size"}}},
      {set::num_micro_batches, {{J, "parallel.num_micro_batches"}, {O, "num_micro_batches"}}},
      {set::attn_tp_size, {{Y, "parallel_config.attn_tp_size"}, {O, "attn_tp_size"}}},
      {set::moe_tp_size, {{Y, "parallel_config.moe_tp_size"}, {O, "moe_tp_size"}}},
      {set::yaml_tp_size,
       {{Y, "parallel_config.embed_tp_size"},
        {Y, "parallel_config.lmhead_tp_size"},
        {Y, "parallel_config.dense_tp_size"},
        {Y, "parallel_config.o_proj_tp_size"},
        {Y, "parallel_config.cp_size"}}},
      {set::devices, {{O, "devices"}, {O, "npu_devices"}}},
      {set::threads, {{O, "threads"}}},
      {set::mlock, {{J, "model.mlock"}, {O, "mlock"}}},
      {set::mmap, {{J, "model.mmap"}, {O, "mmap"}}},
      {set::transparent_huge_pages,
       {{J, "model.transparent_huge_pages"}, {O, "transparent_huge_pages"}}},
      {set::numa, {{J, "parallel.numa"}, {O, "numa"}}},
      {set::cpu_mask, {{J, "parallel.cpu_mask"}, {O, "cpu_mask"}}},
      {set::cpu_strict, {{J, "parallel.cpu_strict"}, {O, "cpu_strict"}}},
      // Experts (ep_config.json).
      {set::num_experts, {{E, "num_experts"}}},
      {set::experts_top_k, {{E, "top_k"}}},
      {set::capacity_factor, {{E, "capacity_factor"}, {O, "capacity_factor"}}},
      {set::expert_parallel_mode, {{E, "expert_parallel_mode"}}},
      {set::communication_dtype, {{E, "communication_dtype"}, {O, "communication_dtype"}}},
      // Expert load balancing.
      {set::num_redundant_experts, {{O, "num_redundant_experts"}}},
      {set::eplb_window, {{O, "eplb_window"}}},
      {set::eplb_interval, {{O, "eplb_interval"}}},
      {set::eplb_load_file, {{O, "eplb_load_file"}}},
      {set::eplb_record, {{O, "eplb_record"}}},
      {set::eplb_config, {{O, "eplb_config"}}},
      // KV cache.
      {set::use_paged_attention,
       {{J, "kv_cache.use_paged_attention"},
        {M, "use_paged_attention"},
        {O, "use_paged_attention"}}},
      {set::block_size,
       {{J, "kv_cache.block_size"},
        {M, "block_size"},
        {Y, "scheduler_config.block_size"},
        {O, "block_size"}}},
      {set::max_num_blocks,
       {{J, "kv_cache.max_num_blocks"}, {M, "max_num_blocks"}, {O, "max_num_blocks"}}},
      {set::kv_cache_memory, {{O, "kv_cache_memory"}}},
      {set::mem_fraction_static,
       {{Y, "scheduler_config.mem_fraction_static"},
        {O, "mem_fraction_static"},
        {O, "gpu_memory_utilization"}}},  // vLLM's spelling: weights + KV within the share
      {set::kv_cache_dtype, {{M, "kv_cache_dtype"}, {O, "kv_cache_dtype"}}},
      {set::enable_kv_cache_quant, {{M, "enable_kv_cache_quant"}, {O, "enable_kv_cache_quant"}}},
      // Scheduler.
      {set::max_num_seqs,
       {{J, "inference.max_batch_size"},
        {Y, "scheduler_config.batch_size"},
        {O, "max_num_seqs"},
        {O, "max_batch_size"}}},
      {set::max_model_len,
       {{J, "inference.max_seq_len"}, {O, "max_model_len"}, {O, "max_seq_len"}}},
      {set::allow_long_max_model_len, {{O, "allow_long_max_model_len"}}},
      {set::max_num_batched_tokens,
       {{Y, "scheduler_config.max_prefill_tokens"}, {O, "max_num_batched_tokens"}}},
      {set::dataset, {{Y, "data_config.dataset"}}},
      {set::max_prompt_len, {{Y, "data_config.input_truncated_len"}, {O, "input_truncated_len"}}},
      {set::enable_prefix_caching, {{O, "enable_prefix_caching"}}},
      {set::scheduling_policy, {{O, "scheduling_policy"}}},
      // Request defaults.
      {set::do_sample, {{J, "inference.do_sample"}, {O, "do_sample"}}},
      {set::temperature,
       {{J, "inference.temperature"}, {Y, "data_config.temperature"}, {O, "temperature"}}},
      {set::top_p, {{J, "inference.top_p"}, {Y, "data_config.top_p"}, {O, "top_p"}}},
      {set::top_k, {{J, "inference.top_k"}, {Y, "data_config.top_k"}, {O, "top_k"}}},
      {set::repetition_penalty, {{J, "inference.repetition_penalty"}, {O, "repetition_penalty"}}},
      {set::max_new_tokens,
       {{J, "inference.max_new_tokens"},  // a deepinfer addition (docs/CONFIG.md)
        {Y, "scheduler_config.max_new_tokens"},
        {O, "max_new_tokens"}}},
      {set::seed, {{J, "inference.seed"}, {O, "seed"}}},  // a deepinfer addition
  };
  return rows;
}

struct Key {
  std::string name;
  Setter set;
};

struct Section {
  std::string name;  // "" in a flat format
  std::vector<Key> keys;
};

struct Layout {
  std::string file;               // how errors call a file of this format
  std::vector<Section> sections;  // one unnamed section: a flat format
};

// The sections of the sectioned formats, in the order their files are read and listed.
std::vector<Section> named_sections(Format format) {
  std::vector<const char*> names;
  if (format == J) names = {"model", "parallel", "kv_cache", "atb", "inference"};
  if (format == Y) names = {"model_config", "data_config", "parallel_config", "scheduler_config"};
  if (names.empty()) return {Section{}};
  std::vector<Section> out;
  for (const char* name : names) out.push_back({name, {}});
  return out;
}

const Layout& layout(Format format) {
  static const std::map<Format, Layout> layouts = [] {
    std::map<Format, Layout> out;
    for (Format f : {J, E, M, Y, O}) out[f].sections = named_sections(f);
    out[J].file = "a JSON object";
    out[Y].file = "a YAML mapping";
    for (const Meaning& meaning : meanings()) {
      for (const Spelling& spelling : meaning.spellings) {
        const std::string path = spelling.path;
        const size_t dot = path.find('.');
        const std::string section = dot == std::string::npos ? "" : path.substr(0, dot);
        const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
        for (Section& s : out[spelling.format].sections) {
          if (s.name == section) s.keys.push_back({key, meaning.set});
        }
      }
    }
    return out;
  }();
  return layouts.at(format);
}

std::string section_list(const Layout& layout) {
  std::string out;
  for (size_t i = 0; i < layout.sections.size(); ++i) {
    out += str_cat(i == 0                            ? ""
                   : i + 1 == layout.sections.size() ? " and "
                                                     : ", ",
                   layout.sections[i].name);
  }
  return out;
}

bool has_key(Format format, const std::string& name) {
  for (const Section& section : layout(format).sections) {
    for (const Key& key : section.keys) {
      if (key.name == name) return true;
    }
  }
  return false;
}

// An unknown top-level name that is a key elsewhere: where it belongs.
std::string misplaced_hint(Format format, const std::string& name) {
  for (const Section& section : layout(format).sections) {
    for (const Key& key : section.keys) {
      if (key.name == name) return str_cat(" (it is a key of the section ", section.name, ")");
    }
  }
  if (format == J && (has_key(E, name) || has_key(M, name))) {
    return " (it belongs in ep_config.json / model_config.json beside this file, which are read "
           "with it)";
  }
  return "";
}

// One object through one section's keys, in table order; any other key is an error listing
// the known ones.
void read_section(RecipeConfig& config, const nlohmann::json& object, const Section& section,
                  const std::string& source) {
  const std::string prefix = section.name.empty() ? "" : section.name + ".";
  if (!object.is_object()) {
    throw ConfigError(str_cat(source, ": ", section.name.empty() ? "the file" : section.name,
                              " must be an object of keys, got ", object.type_name()));
  }
  std::set<std::string> known;
  for (const Key& key : section.keys) {
    known.insert(key.name);
    const auto it = object.find(key.name);
    if (it == object.end() || it->is_null()) continue;
    key.set(config, Value(*it, str_cat(source, ": ", prefix, key.name), false, key.name),
            Mode::merge);
  }
  for (const auto& [name, value] : object.items()) {
    if (known.contains(name)) continue;
    std::string list;
    for (const Key& key : section.keys) list += str_cat(list.empty() ? "" : ", ", key.name);
    throw ConfigError(str_cat(source, ": unknown key '", prefix, name,
                              "': this build does not know it, so it cannot be honoured (known ",
                              section.name.empty() ? "keys" : "keys of " + section.name, ": ", list,
                              "; see docs/CONFIG.md)"));
  }
}

}  // namespace

void read_layout(RecipeConfig& config, const nlohmann::json& tree, Format format,
                 const std::string& source) {
  const Layout& file = layout(format);
  if (file.sections.size() == 1 && file.sections[0].name.empty()) {
    read_section(config, tree, file.sections[0], source);
    return;
  }
  if (!tree.is_object()) {
    throw ConfigError(
        str_cat(source, ": expected ", file.file, " with the sections ", section_list(file)));
  }
  std::set<std::string> known;
  for (const Section& section : file.sections) {
    known.insert(section.name);
    const auto it = tree.find(section.name);
    if (it == tree.end() || it->is_null()) continue;
    read_section(config, *it, section, source);
  }
  for (const auto& [name, value] : tree.items()) {
    if (known.contains(name)) continue;
    throw ConfigError(str_cat(source, ": unknown section '", name, "': expected the sections ",
                              section_list(file), misplaced_hint(format, name),
                              "; see docs/CONFIG.md"));
  }
}

Setter override_setter(const std::string& key) {
  for (const Key& k : layout(O).sections[0].keys) {
    if (k.name == key) return k.set;
  }
  return nullptr;
}

const std::vector<std::string>& override_keys() {
  static const std::vector<std::string> keys = [] {
    std::set<std::string> sorted;
    for (const Key& key : layout(O).sections[0].keys) sorted.insert(key.name);
    return std::vector<std::string>(sorted.begin(), sorted.end());
  }();
  return keys;
}

}  // namespace deepinfer::config
