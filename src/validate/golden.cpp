#include "validate/golden.h"

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"

namespace deepinfer::validate {

namespace {

constexpr const char* kFormat = "deepinfer-reference-v1";

std::vector<float> floats(const nlohmann::json& value, size_t expected, const std::string& where) {
  DI_CHECK(value.is_string(), where, ": expected a base64 string of float32 values");
  const std::vector<uint8_t> bytes = decode_base64(value.get<std::string>());
  DI_CHECK(bytes.size() == expected * sizeof(float), where, ": holds ", bytes.size() / 4,
           " float32 values, expected ", expected);
  std::vector<float> out(expected);
  std::memcpy(out.data(), bytes.data(), bytes.size());  // little-endian hosts only (x86, arm64)
  return out;
}

}  // namespace

std::vector<uint8_t> decode_base64(const std::string& text) {
  std::string bytes;
  DI_CHECK(deepinfer::decode_base64(text, bytes), "base64: '", text.substr(0, 40),
           text.size() > 40 ? "...'" : "'", " is not padded RFC 4648 base64");
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

Golden read_golden(const std::string& path) {
  std::ifstream in(path);
  DI_CHECK(in.good(), "--golden: cannot open ", path, " (no such file or not readable)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("--golden: ", path, " is not JSON (", e.what(), ")");
  }
  DI_CHECK(j.is_object() && j.value("format", "") == kFormat, "--golden: ", path,
           " is not a reference file of tools/dump_reference.py (\"format\": \"", kFormat, "\")");
  Golden g;
  g.path = path;
  try {
    const auto& m = j.at("model");
    g.architecture = m.at("architecture").get<std::string>();
    g.vocab_size = m.at("vocab_size").get<int64_t>();
    g.num_hidden_layers = m.at("num_hidden_layers").get<int64_t>();
    g.hidden_size = m.at("hidden_size").get<int64_t>();
    for (const auto& p : j.at("prompts")) {
      GoldenPrompt gp;
      gp.name = p.at("name").get<std::string>();
      gp.ids = p.at("prompt_ids").get<std::vector<int32_t>>();
      const std::string where = str_cat(path, ": prompt ", gp.name);
      DI_CHECK(!gp.ids.empty(), where, ": empty prompt_ids");
      gp.logits = floats(p.at("logits"), gp.ids.size() * static_cast<size_t>(g.vocab_size),
                         where + " logits");
      for (const auto& b : p.at("blocks")) {
        LayerCapture::Entry e;
        e.layer = b.at("layer").get<int64_t>();
        e.block = b.at("block").get<std::string>();
        e.data = floats(b.at("data"), gp.ids.size() * static_cast<size_t>(g.hidden_size),
                        str_cat(where, " block ", e.layer, ".", e.block));
        gp.blocks.push_back(std::move(e));
      }
      g.prompts.push_back(std::move(gp));
    }
  } catch (const nlohmann::json::exception& e) {
    fail("--golden: ", path, ": missing or mistyped field (", e.what(), ")");
  }
  DI_CHECK(!g.prompts.empty(), "--golden: ", path, " holds no prompts");
  return g;
}

}  // namespace deepinfer::validate
