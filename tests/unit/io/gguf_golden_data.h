#pragma once
// tests/data/gguf/: blocks.gguf written by gguf-py's GGUFWriter and the values gguf-py's
// dequantize gives for each of its tensors (tools/make_gguf_goldens.py).
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::io::testing {

struct GgufGoldens {
  std::string gguf_path;
  nlohmann::json index;       // blocks_expected.json
  std::vector<float> values;  // blocks_expected.bin

  static GgufGoldens load() {
    const std::string dir = std::string(DEEPINFER_TEST_DATA_DIR) + "/gguf/";
    GgufGoldens g;
    g.gguf_path = dir + "blocks.gguf";
    std::ifstream json_in(dir + "blocks_expected.json");
    g.index = nlohmann::json::parse(json_in);
    std::ifstream bin(dir + "blocks_expected.bin", std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(bin), std::istreambuf_iterator<char>()};
    g.values.resize(bytes.size() / sizeof(float));
    std::memcpy(g.values.data(), bytes.data(), g.values.size() * sizeof(float));
    return g;
  }

  // The expected values of one tensor entry of index["tensors"] (empty when gguf-py has none).
  std::vector<float> expected(const nlohmann::json& tensor) const {
    if (tensor["expected_offset"].is_null()) return {};
    const auto begin = values.begin() + tensor["expected_offset"].get<ptrdiff_t>();
    return {begin, begin + tensor["expected_count"].get<ptrdiff_t>()};
  }
};

inline uint32_t float_bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

}  // namespace deepinfer::io::testing
