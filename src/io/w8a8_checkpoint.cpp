#include "io/w8a8_checkpoint.h"

#include "core/error.h"
#include "io/json_fields.h"

namespace deepinfer::io {
namespace {

// One quantization args object of compressed-tensors ("weights", "input_activations"):
// 8-bit symmetric integers with the given strategy and dynamic flag.
void check_args(const JsonFields& group, const std::string& key, const char* strategy,
                bool dynamic) {
  const nlohmann::json* args = group.find(key);
  if (args == nullptr) {
    group.fail_key(key, "missing: ",
                   dynamic ? "weight-only int8 (no activation quantization) is not supported; "
                             "W8A8 needs dynamic per-token int8 activations"
                           : "no weight quantization given");
  }
  if (!args->is_object()) group.fail_key(key, "expected an object, got ", args->type_name());
  const JsonFields a(*args, "", "");
  const auto refuse = [&](const std::string& field, const std::string& problem) {
    group.fail_key(key + "." + field, problem,
                   " (supported: int8 channel-wise symmetric weights with dynamic per-token int8 "
                   "activations; docs/QUANTIZATION.md)");
  };
  if (const nlohmann::json* bits = a.find("num_bits"); !bits || *bits != 8)
    refuse("num_bits", str_cat(bits ? bits->dump() : "missing", " is not supported"));
  if (const nlohmann::json* type = a.find("type"); type && *type != "int")
    refuse("type", str_cat(type->dump(), " is not supported"));
  if (const nlohmann::json* sym = a.find("symmetric"); sym && *sym != true)
    refuse("symmetric", "asymmetric quantization (zero points) is not supported");
  if (const nlohmann::json* s = a.find("strategy"); !s || *s != strategy)
    refuse("strategy",
           str_cat(s ? s->dump() : "missing", " is not supported (expected \"", strategy, "\")"));
  if (const nlohmann::json* d = a.find("dynamic"); (d ? *d == true : false) != dynamic)
    refuse("dynamic", dynamic ? "static activation scales are not supported"
                              : "dynamic weight scales are not supported");
  if (const nlohmann::json* g = a.find("group_size"); g != nullptr)
    refuse("group_size", "group-wise scales are not supported");
  if (a.has("block_structure")) refuse("block_structure", "block-wise scales are not supported");
}

void check_compressed_tensors(const JsonFields& q, const std::string& source) {
  const std::string format = q.string("format").value_or("int-quantized");
  if (format != "int-quantized") {
    q.fail_key("format", "\"", format,
               "\" is not supported (only \"int-quantized\": int8 weights stored as I8)");
  }
  if (q.has("kv_cache_scheme"))
    q.fail_key("kv_cache_scheme", "quantized KV caches are not supported");
  const nlohmann::json* groups = q.find("config_groups");
  if (groups == nullptr || !groups->is_object() || groups->empty())
    q.fail_key("config_groups", "missing or empty: no quantization scheme given");
  for (const auto& [name, group] : groups->items()) {
    if (!group.is_object()) q.fail_key("config_groups." + name, "expected an object");
    const JsonFields g(group, source, "quantization_config.config_groups." + name + ".");
    if (const std::string f = g.string("format").value_or(format); f != "int-quantized")
      g.fail_key("format", "\"", f, "\" is not supported (only \"int-quantized\")");
    if (g.has("output_activations"))
      g.fail_key("output_activations", "output activation quantization is not supported");
    check_args(g, "weights", "channel", false);
    check_args(g, "input_activations", "token", true);
  }
}

}  // namespace

bool parse_w8a8_quantization(const ModelConfig& config, const std::string& source) {
  const auto it = config.raw.find("quantization_config");
  if (it == config.raw.end() || !it->is_object()) return false;
  const JsonFields q(*it, source, "quantization_config.");
  const std::string method = q.string("quant_method").value_or("");
  if (method == "w8a8_int8") {
    const std::string activations = q.string("activation_scheme").value_or("dynamic");
    if (activations != "dynamic") {
      q.fail_key("activation_scheme", "\"", activations,
                 "\" is not supported (only dynamic per-token int8 activations)");
    }
    // SGLang reads a compressed-tensors scheme from config_groups when one is given.
    if (q.has("config_groups")) check_compressed_tensors(q, source);
    return true;
  }
  if (method == "compressed-tensors") {
    check_compressed_tensors(q, source);
    return true;
  }
  return false;
}

}  // namespace deepinfer::io
