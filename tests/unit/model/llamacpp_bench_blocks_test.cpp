// The bench checkpoint itself against llama-quantize, tensor by tensor, when its files are
// there (they are GBs, made outside the repository; skipped otherwise):
//
//   DEEPINFER_BENCH_F32_GGUF      the f32 GGUF of tools/make_bench_model.py's checkpoint
//                                 (tools/convert_to_gguf.py --outtype f32)
//   DEEPINFER_BENCH_LLAMACPP_DIR  <type>.gguf made from it by `llama-quantize --pure SRC OUT T`
//                                 (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k) and
//                                 `llama-quantize SRC OUT Q4_K_M` (q4_k_m.gguf); any subset
//
// Every block matrix of each file must be the type quantization_target picks and hold the bytes
// our quantizers write from the f32 source (q4_k_m: the projections; llama.cpp's token_embd /
// output rules are not ours; routed experts and MLA's kv_b_proj, which our policy keeps, are
// not compared). Set DEEPINFER_BENCH_EXPERTS to the routed experts per layer for an MoE
// checkpoint (q4_k_m's rules for 8 experts). The committed, reduced version of this check is
// llamacpp_blocks_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/quant_blocks.h"
#include "io/safetensors.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

int64_t layer_count(const io::Checkpoint& checkpoint) {
  int64_t layers = 0;
  for (const std::string& name : checkpoint.names()) {
    const size_t at = name.find("layers.");
    if (at != std::string::npos)
      layers = std::max<int64_t>(layers, std::atoll(name.c_str() + at + 7) + 1);
  }
  return layers;
}

TEST(LlamaCppBenchBlocks, BenchCheckpointMatchesLlamaQuantizeTensorByTensor) {
  const char* source_path = std::getenv("DEEPINFER_BENCH_F32_GGUF");
  const char* dir = std::getenv("DEEPINFER_BENCH_LLAMACPP_DIR");
  if (!source_path || !dir || !std::filesystem::exists(source_path))
    GTEST_SKIP() << "DEEPINFER_BENCH_F32_GGUF / DEEPINFER_BENCH_LLAMACPP_DIR not set";
  const io::Checkpoint source = io::Checkpoint::open(source_path);
  int files = 0;
  for (const char* type :
       {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m"}) {
    const std::string path = std::string(dir) + "/" + type + ".gguf";
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path);
    ++files;
    const io::Checkpoint theirs = io::Checkpoint::open(path);
    Quantization q = *parse_quantization(type);
    q.layers = layer_count(source);
    if (const char* experts = std::getenv("DEEPINFER_BENCH_EXPERTS"))
      q.experts = std::atoll(experts);
    int compared = 0;
    for (const std::string& name : theirs.names()) {
      const Tensor blocks = theirs.get(name);
      if (!is_block_dtype(blocks.dtype()) || blocks.ndim() != 2) continue;
      if (q.mix && name.find("layers.") == std::string::npos) continue;
      // Routed experts and MLA's kv_b_proj (joined from attn_k_b / attn_v_b, which a block-typed
      // file also offers as k_b_proj / v_b_proj) are not ours to quantize (MatrixUse::expert /
      // by_element).
      if (name.find(".experts.") != std::string::npos ||
          name.find("kv_b_proj") != std::string::npos ||
          name.find("k_b_proj") != std::string::npos || name.find("v_b_proj") != std::string::npos)
        continue;
      const QuantizationTarget target = quantization_target(q, name, blocks.dim(1));
      ASSERT_TRUE(target.type.has_value()) << name;
      EXPECT_EQ(dtype_name(*target.type), dtype_name(blocks.dtype())) << name;
      if (*target.type != blocks.dtype()) continue;
      const Tensor ours = quantize_matrix(source.get(name), *target.type);
      ASSERT_EQ(ours.nbytes(), blocks.nbytes()) << name;
      EXPECT_EQ(std::memcmp(ours.raw(), blocks.raw(), ours.nbytes()), 0)
          << name << ": blocks differ from llama-quantize's";
      ++compared;
    }
    EXPECT_GT(compared, 0);
    std::printf("%s: %d block matrices equal llama-quantize's\n", type, compared);
  }
  EXPECT_GT(files, 0) << "no <type>.gguf in " << dir;
}

}  // namespace
}  // namespace deepinfer::model
