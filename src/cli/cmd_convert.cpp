// deepinfer convert: the articles' convert_model.py (--input_dir --output_dir --target_platform
// --precision --enable_moe_optimization), plus --tp-size / --ep-size shards, --force and
// --verify DIR. The work is in src/convert/ (docs/CONVERT.md).
#include <algorithm>
#include <csignal>
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "convert/converter.h"
#include "convert/precision.h"
#include "core/error.h"
#include "core/log.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kConvertUsage =
    "usage: deepinfer convert --input_dir DIR --output_dir DIR --precision P [flags]\n"
    "       deepinfer convert --verify DIR\n"
    "\n"
    "Converts a Hugging Face checkpoint (safetensors, sharded or not, or pytorch_model*.bin,\n"
    "read without running code) into a directory every command maps zero-copy: what a load\n"
    "with the same --dtype / --quantization would hold, written once (docs/CONVERT.md).\n"
    "\n"
    "  --input_dir DIR            the source checkpoint directory\n"
    "  --output_dir DIR           created; written beside it as DIR.tmp-<pid> and renamed\n"
    "                             into place only when complete\n"
    "  --precision P              fp32 | fp16 | bf16 (every matrix in that type; bf16 -> fp16\n"
    "                             overflows are clamped to +-65504 and counted) or a\n"
    "                             --quantization type: q8_0 (int8), q4_0, q4_1, q5_0, q5_1,\n"
    "                             q4_k, q5_k, q6_k, q4_k_m (int4)\n"
    "                             (projections quantized, the rest as stored)\n"
    "  --quantize_lm_head         with a block precision: the lm_head (and a tied embedding)\n"
    "                             too, q6_k (q8_0 for q8_0 or rows not whole 256 blocks)\n"
    "  --target_platform cpu      the only platform (npu: use the recipe's NPU converter)\n"
    "  --enable_moe_optimization  write each MoE layer's experts stacked as fused\n"
    "                             gate_up_proj [E, 2I, H] / down_proj [E, H, I] tensors\n"
    "  --ep-size N                per-rank shards DIR/rank0 .. rank<N-1>, each holding only\n"
    "                             its rank's experts (run with mpirun -n N)\n"
    "  --tp-size N                per-rank shards, each holding only its rank's heads, MLP\n"
    "                             slices and vocabulary rows (run with mpirun -n N -tp N);\n"
    "                             with --ep-size E: max(N, E) ranks, as mpirun would run them\n"
    "  --max-shard-size BYTES     largest model-0000k-of-0000n.safetensors (default 4 GiB)\n"
    "  --force                    replace an existing --output_dir\n"
    "  --verify DIR               check a converted directory: every file's size and sha256\n"
    "  --log-level L              debug | info | warn | error | off\n"
    "\n"
    "Dashed spellings work too (--input-dir, --enable-moe-optimization, ...).\n";

// The articles spell flags with underscores (--input_dir); ours with dashes: accept both.
std::vector<std::string> dashed(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (const std::string& arg : argv) {
    if (arg.rfind("--", 0) != 0) {
      out.push_back(arg);
      continue;
    }
    const size_t end = std::min(arg.find('='), arg.size());
    std::string name = arg.substr(0, end);
    std::replace(name.begin() + 2, name.end(), '_', '-');
    out.push_back(name + arg.substr(end));
  }
  return out;
}

int run_convert(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf("%s", kConvertUsage);
    return 0;
  }
  const Args args(dashed(argv),
                  {"input-dir", "output-dir", "precision", "target-platform", "tp-size", "ep-size",
                   "max-shard-size", "verify", "log-level"},
                  {"enable-moe-optimization", "force", "quantize-lm-head"});
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  if (const auto dir = args.get("verify")) {
    DI_CHECK(!args.has("input-dir") && !args.has("output-dir"),
             "--verify DIR checks a converted directory; give it alone");
    const int64_t files = convert::verify_converted_dir(*dir);
    std::printf("%s: %lld files match deepinfer_manifest.json (sizes and sha256)\n", dir->c_str(),
                static_cast<long long>(files));
    return 0;
  }
  const std::string platform = args.get_or("target-platform", "cpu");
  DI_CHECK(platform != "npu",
           "--target_platform npu: deepinfer runs on CPUs and writes CPU checkpoints only; for "
           "Ascend NPUs use the converter of the cann-recipes-infer recipes "
           "(https://gitee.com/ascend/cann-recipes-infer or "
           "https://github.com/hicann/cann-recipes-infer), or give --target_platform cpu");
  DI_CHECK(platform == "cpu", "--target_platform ", platform,
           ": unknown platform (expected cpu; npu is refused, deepinfer runs on CPUs)");
  convert::ConvertOptions options;
  options.input_dir = args.require("input-dir");
  options.output_dir = args.require("output-dir");
  DI_CHECK(args.has("precision"), "give --precision (", convert::precision_choices(), ")");
  options.precision = *args.get("precision");
  options.quantize_lm_head = args.flag("quantize-lm-head");
  options.moe_optimization = args.flag("enable-moe-optimization");
  options.tp_size = args.get_int("tp-size", 1);
  options.ep_size = args.get_int("ep-size", 1);
  options.force = args.flag("force");
  const int64_t shard = args.get_int("max-shard-size", static_cast<int64_t>(4ull << 30));
  DI_CHECK(shard > 0, "--max-shard-size must be positive, got ", shard);
  options.max_shard_bytes = static_cast<uint64_t>(shard);
  // A file-size limit (ulimit -f) must end in a write error we report, not in SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  const convert::ConvertSummary s = convert::convert_checkpoint(options);
  if (s.fp16_overflows > 0) {
    log::warn(options.output_dir, ": ", s.fp16_overflows,
              " weights beyond the fp16 range were clamped to +-65504");
  }
  std::printf("%s: %lld tensors (%.1f MiB) in %s%s, from %s\n", options.output_dir.c_str(),
              static_cast<long long>(s.tensors), static_cast<double>(s.bytes) / (1 << 20),
              s.precision.c_str(),
              s.ranks > 1 ? (", " + std::to_string(s.ranks) + " rank shards").c_str() : "",
              options.input_dir.c_str());
  if (s.fp16_overflows > 0) {
    std::printf("fp16 overflows clamped: %lld\n", static_cast<long long>(s.fp16_overflows));
  }
  return 0;
}

const Registration registration("convert",
                                "convert a checkpoint once (precision, quantization, MoE stacks, "
                                "per-rank shards)",
                                &run_convert);

}  // namespace
}  // namespace deepinfer::cli
