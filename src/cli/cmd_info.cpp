// deepinfer info --model DIR [--json]: what a checkpoint is and what it costs to serve.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_flags.h"
#include "config/apply.h"
#include "config/progress.h"
#include "config/setup.h"
#include "core/log.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "io/hf_config.h"
#include "io/safetensors.h"

namespace deepinfer::cli {
namespace {

bool contains(const std::string& name, const char* part) {
  return name.find(part) != std::string::npos;
}

// Which part of the model a tensor belongs to, by its name (Hugging Face and GGUF spellings).
// Norms first: "attn_norm" / "input_layernorm" are norms, not attention.
const char* part_of(const std::string& name) {
  if (contains(name, "norm")) return "norms";
  if (contains(name, "embed_tokens") || contains(name, "token_embd") || contains(name, "wte")) {
    return "embeddings";
  }
  if (contains(name, "lm_head") || name == "output.weight") return "lm_head";
  if (contains(name, "self_attn") || contains(name, "attn")) return "attention";
  if ((contains(name, "mlp.experts") && !contains(name, "shared")) || contains(name, "_exps")) {
    return "experts";
  }
  if (contains(name, "mlp") || contains(name, "ffn")) return "mlp";
  return "other";
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? str_cat(static_cast<int64_t>(bytes), " B")
                   : str_cat(config::fixed(bytes, 1), " ", units[unit]);
}

// One stored tensor as info counts it, whatever the file format.
struct StoredTensor {
  std::string name;
  std::string dtype;  // as stored: f32, bf16, f8_e4m3, ...
  int64_t numel = 0;
  int64_t bytes = 0;
};

// The tensors as stored: a GGUF file's under ggml's names and types (Q4_1, F32, ...), a
// checkpoint directory's (safetensors, sharded or not) under its own.
std::vector<StoredTensor> stored_tensors(const std::string& path) {
  std::vector<StoredTensor> out;
  if (const auto gguf = io::gguf_model_file(path)) {
    const io::GgufFile file = io::GgufFile::open(*gguf);
    for (const auto& t : file.tensors()) {
      std::string type(quant_traits(t.type).name);
      std::transform(type.begin(), type.end(), type.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      out.push_back({t.name, type, shape_numel(t.shape), static_cast<int64_t>(t.nbytes)});
    }
    return out;
  }
  const io::Checkpoint checkpoint = io::Checkpoint::open(path);
  for (const auto& name : checkpoint.names()) {
    const auto& info = checkpoint.info(name);
    out.push_back({name, std::string(dtype_name(info.dtype)), shape_numel(info.shape),
                   static_cast<int64_t>(info.data_end - info.data_begin)});
  }
  return out;
}

// "none" when config.json has no quantization_config, else its method and format; for a
// GGUF file, the block-quantized ggml types it stores ("gguf q4_1, q6_k").
std::string quantization_of(const io::ModelConfig& model, const std::string& dir,
                            const std::map<std::string, int64_t>& stored, bool gguf) {
  if (const auto manifest = io::read_manifest(dir)) {
    return str_cat("converted to ", manifest->precision, " (deepinfer convert; docs/CONVERT.md)");
  }
  if (gguf) {
    std::string types;
    for (const auto& [type, count] : stored) {
      if (type != "f32" && type != "f16" && type != "bf16") {
        types += str_cat(types.empty() ? "" : ", ", type);
      }
    }
    return types.empty() ? "none (gguf)" : "gguf " + types;
  }
  const auto it = model.raw.find("quantization_config");
  if (it == model.raw.end() || !it->is_object()) return "none";
  std::string out = it->value("quant_method", std::string("unknown"));
  if (it->contains("fmt") && it->at("fmt").is_string())
    out += " " + it->at("fmt").get<std::string>();
  if (it->contains("weight_block_size") && it->at("weight_block_size").is_array()) {
    out += " (blocks " + it->at("weight_block_size").dump() + ")";
  }
  return out;
}

int run_info(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf(
        "usage: deepinfer info -m MODEL [--json] [--dtype auto|f32|bf16|f16]\n"
        "                      [--quantization q8_0|q4_k_m|w8a8|fp8|...]\n"
        "prints the architecture, layout, experts, quantization, the memory each part of the\n"
        "weights takes and the KV cache cost per token\n");
    return 0;
  }
  const Args args(argv, with_parallel_value_flags(with_model_flags({})),
                  with_model_bool_flags(with_parallel_bool_flags({"json"})),
                  {.aliases = {{"m", "model"}}});
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  const std::string dir = args.require("model");
  model::LoadOptions load_options = load_options_from(args);
  // Under mpirun (--expert-parallel-size N): each rank loads what it would serve with, and
  // rank 0 prints what every rank holds.
  const auto parallel = config::parallel_context_for(recipe_from_flags(args, false));
  load_options.parallel = parallel;
  model::LoadReport load_report;
  const auto model = model::load_model(dir, load_options, &load_report);
  const io::ModelConfig& mc = model->config();
  int64_t rank_bytes = 0;
  for (const auto& [type, bytes] : load_report.weight_bytes) rank_bytes += bytes;
  const std::vector<int64_t> bytes_per_rank =
      parallel->world()->all_gather(std::span<const int64_t>(&rank_bytes, 1));
  if (!parallel->is_driver()) return 0;  // rank 0 prints for every rank

  int64_t parameters = 0;
  std::map<std::string, int64_t> dtype_counts;
  // Parts in the order a token meets them; "other" (e.g. DeepSeek's MTP layers) last.
  std::vector<std::pair<std::string, int64_t>> part_bytes;
  for (const char* part :
       {"embeddings", "attention", "mlp", "experts", "norms", "lm_head", "other"}) {
    part_bytes.emplace_back(part, 0);
  }
  const auto add_bytes = [&](const std::string& part, int64_t bytes) {
    for (auto& [name, total] : part_bytes) {
      if (name == part) total += bytes;
    }
  };
  int64_t weight_bytes = 0;
  for (const StoredTensor& t : stored_tensors(dir)) {
    parameters += t.numel;
    weight_bytes += t.bytes;
    dtype_counts[t.dtype] += t.numel;
    add_bytes(part_of(t.name), t.bytes);
  }
  std::string dtype = "mixed";
  for (const auto& [name, count] : dtype_counts) {
    if (count * 2 > parameters) dtype = name;
  }
  const auto layout = model->kv_layout();
  const auto kv_bytes = [&](DType kv_dtype) {
    return model::kv_cache_spec(*model, 16, 1, kv_dtype).bytes_per_token();
  };
  const int64_t routed = config::routed_experts(mc);
  const auto shared_key = mc.raw.find("n_shared_experts");
  const int64_t shared = shared_key != mc.raw.end() && shared_key->is_number_integer()
                             ? shared_key->get<int64_t>()
                             : 0;
  const bool test_model = config::is_test_model(mc);

  nlohmann::ordered_json out;
  out["architecture"] = mc.architecture;
  out["model_type"] = mc.model_type;
  if (test_model) out["test_model"] = true;
  out["parameters"] = parameters;
  out["dtype"] = dtype;
  out["stored_dtypes"] = dtype_counts;  // parameters per stored dtype
  out["quantization"] =
      quantization_of(mc, dir, dtype_counts, io::gguf_model_file(dir).has_value());
  out["weight_bytes"] = weight_bytes;
  out["layers"] = mc.num_hidden_layers;
  out["hidden_size"] = mc.hidden_size;
  out["vocab_size"] = mc.vocab_size;
  out["attention_heads"] = mc.num_attention_heads;
  out["kv_heads"] = layout.kv_heads;
  out["head_dim"] = layout.head_dim;
  out["experts"] = routed;
  out["shared_experts"] = shared;
  out["experts_per_token"] = config::experts_per_token(mc);
  out["memory_bytes"] = nlohmann::ordered_json::object();
  for (const auto& [part, bytes] : part_bytes) out["memory_bytes"][part] = bytes;
  out["kv_cache_dtype"] = "f32";  // the default (auto)
  out["kv_bytes_per_token"] = kv_bytes(DType::f32);
  out["kv_bytes_per_token_bf16"] = kv_bytes(DType::bf16);
  if (layout.index_dim > 0) {  // DeepSeek Sparse Attention: the indexer keys are in the above
    const auto indexer_layers =
        std::count(layout.index_layers.begin(), layout.index_layers.end(), true);
    out["sparse_attention"] = {
        {"index_topk", mc.raw.value("index_topk", int64_t{2048})},
        {"index_head_dim", layout.index_dim},
        {"indexer_layers", indexer_layers},
        {"index_bytes_per_token_bf16", indexer_layers * layout.index_dim * 2}};
  }
  out["kv_bytes_per_token_int8"] = kv_bytes(DType::i8);  // scales included
  out["max_position_embeddings"] = mc.max_position_embeddings;
  // FP8 matrices kept as stored with their block scales: f8_e4m3 counts both; int8 (W8A8)
  // matrices with their row scales: i8 counts both.
  const bool scaled_kept =
      load_report.weight_bytes.count("f8_e4m3") > 0 || load_report.weight_bytes.count("i8") > 0;
  if (load_options.quantization || scaled_kept) {
    // What --quantization (or keeping FP8 / int8) made of the weights: bytes held per type.
    if (load_options.quantization) {
      out["quantization_at_load"] = load_options.quantization->name();
      out["quantization_at_load_summary"] = load_report.quantization;
    }
    int64_t loaded = 0;
    for (const auto& [type, bytes] : load_report.weight_bytes) loaded += bytes;
    out["loaded_weight_bytes"] = loaded;
    out["loaded_weight_bytes_by_dtype"] = load_report.weight_bytes;
  }
  if (parallel->distributed()) {
    out["world_size"] = parallel->world_size();
    out["expert_parallel_size"] = parallel->expert_parallel_size();
    out["weight_bytes_per_rank"] = bytes_per_rank;
  }
  if (args.flag("json")) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }

  const auto row = [](const std::string& key, const std::string& value) {
    std::printf("%-24s %s\n", key.c_str(), value.c_str());
  };
  if (test_model) {
    row("note",
        "random-weight test model (config.json: \"deepinfer_test_model\": true): its output "
        "is not meaningful text");
  }
  row("architecture", str_cat(mc.architecture, " (", mc.model_type, ")"));
  row("parameters", str_cat(parameters, " (", dtype, ")"));
  std::string stored;
  for (const auto& [name, count] : dtype_counts) {
    stored += str_cat(stored.empty() ? "" : ", ", name, " ", count);
  }
  row("quantization", str_cat(out["quantization"].get<std::string>(), " (stored: ", stored, ")"));
  row("layers", std::to_string(mc.num_hidden_layers));
  row("hidden_size", std::to_string(mc.hidden_size));
  row("vocab_size", std::to_string(mc.vocab_size));
  row("attention", str_cat(mc.num_attention_heads, " heads, ", layout.kv_heads,
                           " kv heads, head_dim ", layout.head_dim));
  row("experts", routed > 0
                     ? str_cat(routed, " routed, top-", config::experts_per_token(mc), " per token",
                               shared > 0 ? str_cat(", ", shared, " shared") : std::string())
                     : std::string("none (dense MLP)"));
  if (out.contains("sparse_attention")) {
    const auto& sa = out["sparse_attention"];
    row("sparse attention",
        str_cat("top-", sa["index_topk"].get<int64_t>(), " positions per token, indexer key of ",
                sa["index_head_dim"].get<int64_t>(), " in ", sa["indexer_layers"].get<int64_t>(),
                " layers (", sa["index_bytes_per_token_bf16"].get<int64_t>(),
                " bytes per token in bf16, counted in the KV cost)"));
  }
  row("max_position_embeddings", std::to_string(mc.max_position_embeddings));
  std::printf("memory (weights as stored):\n");
  for (const auto& [part, bytes] : part_bytes) {
    if (bytes > 0 || part != "other") row("  " + part, human_bytes(static_cast<double>(bytes)));
  }
  row("  total", human_bytes(static_cast<double>(weight_bytes)));
  row("  kv cache per token",
      str_cat(human_bytes(static_cast<double>(kv_bytes(DType::f32))), " (f32, the default), ",
              human_bytes(static_cast<double>(kv_bytes(DType::bf16))), " (bf16), ",
              human_bytes(static_cast<double>(kv_bytes(DType::i8))), " (int8)"));
  if (parallel->distributed()) {
    const int64_t per_rank = routed / parallel->expert_parallel_size();
    std::printf("memory per rank (weights loaded, expert parallel %lld of %lld ranks):\n",
                static_cast<long long>(parallel->expert_parallel_size()),
                static_cast<long long>(parallel->world_size()));
    for (size_t r = 0; r < bytes_per_rank.size(); ++r) {
      const int64_t first = per_rank * static_cast<int64_t>(r);
      row(str_cat("  rank ", r),
          str_cat(human_bytes(static_cast<double>(bytes_per_rank[r])), " (routed experts ", first,
                  "-", first + per_rank - 1, ")"));
    }
  }
  if (load_options.quantization || scaled_kept) {
    if (load_options.quantization) {
      std::printf("memory (weights after --quantization %s):\n",
                  load_options.quantization->name().c_str());
    } else {
      std::printf("memory (weights in memory; f8_e4m3 / i8: FP8 / int8 kept with their scales):\n");
    }
    for (const auto& [type, bytes] : load_report.weight_bytes) {
      row("  " + type, human_bytes(static_cast<double>(bytes)));
    }
    row("  total", human_bytes(static_cast<double>(out["loaded_weight_bytes"].get<int64_t>())));
    if (load_options.quantization) row("  policy", load_report.quantization);
  }
  return 0;
}

const Registration registration("info",
                                "describe a checkpoint (layout, experts, memory per part, KV cost)",
                                &run_info);

}  // namespace
}  // namespace deepinfer::cli
