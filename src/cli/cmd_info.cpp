// deepinfer info --model DIR [--json]: what a checkpoint is and what it costs to serve.
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_flags.h"
#include "core/log.h"
#include "io/safetensors.h"

namespace deepinfer::cli {
namespace {

int run_info(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    std::printf("usage: deepinfer info --model DIR [--json] [--dtype auto|f32|bf16|f16]\n");
    return 0;
  }
  const Args args(argv, with_model_flags({}), {"json"});
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  const std::string dir = args.require("model");
  const auto model = model::load_model(dir, load_options_from(args));
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);

  int64_t parameters = 0;
  std::map<std::string, int64_t> dtype_counts;
  for (const auto& name : checkpoint.names()) {
    const auto& info = checkpoint.info(name);
    const int64_t numel = shape_numel(info.shape);
    parameters += numel;
    dtype_counts[std::string(dtype_name(info.dtype))] += numel;
  }
  std::string dtype = "mixed";
  for (const auto& [name, count] : dtype_counts) {
    if (count * 2 > parameters) dtype = name;
  }
  const auto layout = model->kv_layout();
  const auto kv_bytes = [&](DType kv_dtype) {
    return model::kv_cache_spec(*model, 16, 1, kv_dtype).bytes_per_token();
  };
  const auto& config = model->config();

  nlohmann::ordered_json out;
  out["architecture"] = config.architecture;
  out["model_type"] = config.model_type;
  out["parameters"] = parameters;
  out["dtype"] = dtype;
  out["weight_bytes"] = checkpoint.total_bytes();
  out["layers"] = config.num_hidden_layers;
  out["hidden_size"] = config.hidden_size;
  out["vocab_size"] = config.vocab_size;
  out["attention_heads"] = config.num_attention_heads;
  out["kv_heads"] = layout.kv_heads;
  out["head_dim"] = layout.head_dim;
  out["kv_cache_dtype"] = "f32";  // the default (auto)
  out["kv_bytes_per_token"] = kv_bytes(DType::f32);
  out["kv_bytes_per_token_bf16"] = kv_bytes(DType::bf16);
  out["kv_bytes_per_token_int8"] = kv_bytes(DType::i8);  // scales included
  out["max_position_embeddings"] = config.max_position_embeddings;
  if (args.flag("json")) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    for (const auto& [key, value] : out.items()) {
      std::printf("%-24s %s\n", key.c_str(),
                  value.is_string() ? value.get<std::string>().c_str() : value.dump().c_str());
    }
  }
  return 0;
}

const Registration registration("info", "describe a model checkpoint (size, layout, KV cost)",
                                &run_info);

}  // namespace
}  // namespace deepinfer::cli
