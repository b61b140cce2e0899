// Our quantizers and our q4_k_m choice against llama.cpp's own: tools/make_kquant_goldens.py
// ran `llama-quantize` (--pure for the single types) on a GGUF of generated tensors with the
// row lengths of the bench shapes and committed, per type and tensor, the type llama.cpp chose
// and the sha256 of its blocks (tests/data/quantize/llamacpp_blocks.json). Here the same
// tensors are generated again (the script's splitmix64 generator, reimplemented), quantized
// with quantization_target's type, and hashed: every tensor must match, type and bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "core/quantize_blocks.h"
#include "core/sha256_test_util.h"
#include "core/text_file.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

// make_kquant_goldens.py's generator, element i of a tensor: splitmix64 of
// seed + (i + 1) * golden; the four 16-bit chunks summed, / 65536 - 2, times scale (times 8
// for a top byte of 0x5a); sparse tensors keep the elements whose low three bits are 0; then
// f32 and bf16 truncation.
std::vector<float> generate(uint64_t seed, int64_t n, double scale, bool sparse) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = seed + static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    double chunks = 0;
    for (int k = 0; k < 4; ++k) chunks += static_cast<double>((z >> (16 * k)) & 0xffff);
    double v = (chunks / 65536.0 - 2.0) * scale;
    if ((z >> 56) == 0x5a) v *= 8.0;
    if (sparse && (z & 7) != 0) v = 0.0;
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    bits &= 0xffff0000u;
    std::memcpy(&out[static_cast<size_t>(i)], &bits, sizeof(bits));
  }
  return out;
}

// The GGUF tensor names of the golden file as the HF checkpoint spells them (the names
// quantization_target reads).
std::string hf_name(const std::string& gguf) {
  static const std::map<std::string, std::string> kinds = {
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
  };
  const size_t dot1 = gguf.find('.');
  const size_t dot2 = gguf.find('.', dot1 + 1);
  const std::string layer = gguf.substr(dot1 + 1, dot2 - dot1 - 1);
  const std::string kind = gguf.substr(dot2 + 1, gguf.rfind(".weight") - dot2 - 1);
  const auto it = kinds.find(kind);
  DI_CHECK(it != kinds.end(), "llamacpp_blocks.json: tensor ", gguf, " has no HF name here");
  return "model.layers." + layer + "." + it->second + ".weight";
}

TEST(LlamaCppBlocks, EveryTypeAndTensorMatchesLlamaQuantize) {
  const nlohmann::json doc =
      read_json_file(std::string(DEEPINFER_TEST_DATA_DIR) + "/quantize/llamacpp_blocks.json");
  ASSERT_EQ(doc["types"].size(), 9u);
  std::map<std::string, std::vector<float>> sources;
  for (const auto& t : doc["tensors"]) {
    sources[t["name"]] =
        generate(t["seed"].get<uint64_t>(), t["rows"].get<int64_t>() * t["cols"].get<int64_t>(),
                 t["scale"].get<double>(), t["sparse"].get<bool>());
  }
  int compared = 0;
  for (const auto& [type_name, golden] : doc["types"].items()) {
    SCOPED_TRACE(type_name);
    Quantization q = *parse_quantization(type_name);
    q.layers = doc["layers"].get<int64_t>();
    q.experts = doc["experts"].get<int64_t>();
    EXPECT_EQ(golden["pure"].get<bool>(), !q.mix);
    int mismatches = 0;
    for (const auto& t : doc["tensors"]) {
      const std::string name = t["name"];
      const int64_t rows = t["rows"];
      const int64_t cols = t["cols"];
      const auto& want = golden["tensors"][name];
      const QuantizationTarget target = quantization_target(q, hf_name(name), cols);
      ASSERT_TRUE(target.type.has_value()) << name;
      const QuantTraits& traits = *block_traits(*target.type);
      EXPECT_EQ(std::string(traits.name), want["type"].get<std::string>()) << name;
      const size_t row_bytes = quant_row_bytes(traits.type, cols);
      std::vector<uint8_t> blocks(row_bytes * static_cast<size_t>(rows));
      const std::vector<float>& x = sources[name];
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(traits.type, x.data() + r * cols, blocks.data() + r * row_bytes, cols);
      const std::string hash = testing::sha256_hex(blocks.data(), blocks.size());
      if (hash != want["sha256"].get<std::string>() && ++mismatches <= 3)
        ADD_FAILURE() << name << " (" << traits.name << ", rows of " << cols
                      << "): blocks differ from llama-quantize's";
      ++compared;
    }
    EXPECT_EQ(mismatches, 0);
  }
  EXPECT_EQ(compared, 9 * static_cast<int>(doc["tensors"].size()));
}

// --quantize-lm-head against llama-quantize without --pure: output.weight of an untied model
// and token_embd.weight of a tied one get q6_k, or q8_0 for q8_0 and for rows that are not
// whole 256-element super-blocks (llama_tensor_get_type), with the same blocks.
TEST(LlamaCppBlocks, TheLmHeadGetsLlamaQuantizesOutputTypeAndBlocks) {
  const nlohmann::json doc =
      read_json_file(std::string(DEEPINFER_TEST_DATA_DIR) + "/quantize/llamacpp_blocks.json");
  const nlohmann::json& heads = doc["heads"];
  ASSERT_EQ(heads["types"].size(), 4u);
  int compared = 0;
  for (const auto& [type_name, golden] : heads["types"].items()) {
    const Quantization q = with_lm_head(*parse_quantization(type_name));
    for (const auto& t : heads["tensors"]) {
      const std::string file = t["file"];
      SCOPED_TRACE(type_name + " " + file);
      const int64_t rows = t["rows"];
      const int64_t cols = t["cols"];
      const std::vector<float> x = generate(t["seed"].get<uint64_t>(), rows * cols,
                                            t["scale"].get<double>(), t["sparse"].get<bool>());
      const QuantizationTarget target = lm_head_target(q, cols);
      ASSERT_TRUE(target.type.has_value());
      const QuantTraits& traits = *block_traits(*target.type);
      EXPECT_EQ(std::string(traits.name), golden[file]["type"].get<std::string>());
      const size_t row_bytes = quant_row_bytes(traits.type, cols);
      std::vector<uint8_t> blocks(row_bytes * static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(traits.type, x.data() + r * cols, blocks.data() + r * row_bytes, cols);
      EXPECT_EQ(testing::sha256_hex(blocks.data(), blocks.size()),
                golden[file]["sha256"].get<std::string>());
      ++compared;
    }
  }
  EXPECT_EQ(compared, 12);
  // Rows that are not whole 32-element blocks stay as stored (llama.cpp would keep F16).
  EXPECT_FALSE(lm_head_target(with_lm_head(DType::q4_0), 48).type);
}

// The q4_k_m mix of a 24-layer dense model, the layers use_more_bits picks: the first and last
// three, and every third between them (llama.cpp's llama_tensor_get_type).
TEST(LlamaCppBlocks, Q4KMGivesAttnVAndFfnDownOfLlamaCppsLayersQ6K) {
  Quantization q = Quantization::q4_k_m();
  q.layers = 24;
  std::string picked;
  for (int layer = 0; layer < 24; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    const auto v = quantization_target(q, prefix + "self_attn.v_proj.weight", 1024);
    const auto down = quantization_target(q, prefix + "mlp.down_proj.weight", 1024);
    const auto gate = quantization_target(q, prefix + "mlp.gate_proj.weight", 1024);
    EXPECT_EQ(v.type, down.type) << layer;
    EXPECT_EQ(gate.type, DType::q4_k) << layer;
    if (v.type == DType::q6_k) picked += std::to_string(layer) + " ";
  }
  EXPECT_EQ(picked, "0 1 2 5 8 11 14 17 20 21 22 23 ");
  // Eight experts (Mixtral's shape): attn_v and attn_k q8_0, attn_output q5_k.
  q.experts = 8;
  EXPECT_EQ(quantization_target(q, "model.layers.4.self_attn.v_proj.weight", 1024).type,
            DType::q8_0);
  EXPECT_EQ(quantization_target(q, "model.layers.4.self_attn.k_proj.weight", 1024).type,
            DType::q8_0);
  EXPECT_EQ(quantization_target(q, "model.layers.4.self_attn.o_proj.weight", 1024).type,
            DType::q5_k);
  // Fallbacks for rows that are not whole super-blocks, then rows that are not whole blocks.
  q.experts = 0;
  const auto v896 = quantization_target(q, "model.layers.0.self_attn.v_proj.weight", 896);
  EXPECT_EQ(v896.type, DType::q8_0);
  EXPECT_TRUE(v896.fallback);
  EXPECT_EQ(quantization_target(q, "model.layers.3.mlp.up_proj.weight", 1408).type, DType::q5_0);
  EXPECT_EQ(quantization_target(DType::q5_k, "x.weight", 1408).type, DType::q5_1);
  EXPECT_FALSE(quantization_target(q, "model.layers.3.mlp.up_proj.weight", 1000).type);
  EXPECT_FALSE(quantization_target(DType::q8_0, "x.weight", 48).type);
}

TEST(LlamaCppBlocks, TheMixRefusesAnUnknownLayerCount) {
  try {
    quantization_target(Quantization::q4_k_m(), "model.layers.0.mlp.down_proj.weight", 256);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs the model's layer count"), std::string::npos)
        << e.what();
  }
}

TEST(Sha256TestUtil, FipsExamples) {
  EXPECT_EQ(testing::sha256_hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(testing::sha256_hex("", 0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(testing::sha256_hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

}  // namespace
}  // namespace deepinfer::model
