#pragma once
// deepinfer convert: a Hugging Face checkpoint (safetensors, sharded or not, or
// pytorch_model*.bin) in, a converted checkpoint directory out (docs/CONVERT.md). The model is
// built by the normal loader with a recording hook, once per rank, and what each build holds
// is written: so loading the output equals loading the input with the same --dtype /
// --quantization, bit for bit, and each rank's shard is exactly what that rank loads.
#include <cstdint>
#include <string>

#include "io/converted_manifest.h"

namespace deepinfer::convert {

struct ConvertOptions {
  std::string input_dir;
  std::string output_dir;
  std::string precision;          // --precision (convert/precision.h)
  bool quantize_lm_head = false;  // --quantize_lm_head: with a block precision, the lm_head too
  bool moe_optimization = false;
  int64_t tp_size = 1;
  int64_t ep_size = 1;
  bool force = false;                     // replace an existing output_dir
  uint64_t max_shard_bytes = 4ull << 30;  // per model-0000k-of-0000n.safetensors file
  bool progress = true;                   // a progress bar when stderr is a terminal
};

struct ConvertSummary {
  int64_t ranks = 1;
  int64_t tensors = 0;  // written, over all ranks
  uint64_t bytes = 0;   // of tensor data written
  int64_t fp16_overflows = 0;
  std::string precision;
};

// Converts; the output appears (renamed into place) only when complete. Error naming the
// problem otherwise, with nothing left that looks like a finished conversion.
ConvertSummary convert_checkpoint(const ConvertOptions& options);

// Checks a converted directory against its manifest, every file's sha256 included; returns
// the number of files checked. Error naming the first mismatch.
int64_t verify_converted_dir(const std::string& dir);

}  // namespace deepinfer::convert
