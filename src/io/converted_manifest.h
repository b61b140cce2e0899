#pragma once
// deepinfer_manifest.json: what `deepinfer convert` wrote into a checkpoint directory, and the
// check the loader makes before mapping one (docs/CONVERT.md). A converted directory is a
// Hugging Face checkpoint directory plus this file; a sharded conversion (--tp-size /
// --ep-size) is a directory of rank<k>/ checkpoint directories with a top-level manifest
// listing them.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::io {

inline constexpr const char* kManifestFile = "deepinfer_manifest.json";
// Bumped by any change of the on-disk layout (a new kernel layout included), so a reader never
// maps a layout it does not know.
inline constexpr int kManifestFormatVersion = 1;
// The safetensors __metadata__ key every converted shard carries: a directory whose shards
// have it but whose manifest is missing is an incomplete copy, refused.
inline constexpr const char* kConvertedShardKey = "deepinfer_format_version";

// Elements [begin, end) along dimension `dim` of a tensor whose full length there is `full`:
// what one rank holds of it in a per-rank shard (an expert-parallel rank's experts: dim 0; a
// tensor-parallel rank's rows: dim 0, or its columns: the last dimension).
struct TensorSlice {
  int dim = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t full = 0;
  bool operator==(const TensorSlice&) const = default;
};

struct ManifestFile {
  uint64_t size = 0;
  std::string sha256;  // 64 lowercase hex digits
};

struct Manifest {
  int format_version = kManifestFormatVersion;
  std::string tool;  // "deepinfer convert 0.1.0"
  std::string source_dir;
  std::string source_sha256;  // over the source config.json, safetensors headers and sizes
  std::string precision;      // --precision as given ("q8_0", "bf16", ...)
  bool moe_optimization = false;
  int64_t tp_size = 1;
  int64_t ep_size = 1;
  std::optional<int64_t> rank;     // set in a rank's directory of a sharded conversion
  std::vector<std::string> ranks;  // set in the top directory of one: "rank0", "rank1", ...
  int64_t tensor_alignment = 0;
  int64_t fp16_overflows = 0;                 // values clamped to +-65504 (--precision fp16)
  std::map<std::string, ManifestFile> files;  // every file beside the manifest, by name
  std::map<std::string, TensorSlice> sliced;  // tensors holding only this rank's part
};

nlohmann::json manifest_to_json(const Manifest& manifest);
// Parses and validates; `path` names the file in errors.
Manifest manifest_from_json(const nlohmann::json& json, const std::string& path);

// The manifest of `dir`, or nullopt when it has none (a plain Hugging Face directory).
std::optional<Manifest> read_manifest(const std::string& dir);

// Checks a converted directory against its manifest: the format version, and every listed file
// present with its size (always; cheap), plus its sha256 when `hashes` (reads every byte).
// Throws Error naming the file and the problem. A sharded top directory checks each rank's.
void verify_converted(const std::string& dir, const Manifest& manifest, bool hashes);

// The directory holding rank `rank`'s weights: `dir` itself unless `dir` is the top of a
// sharded conversion, whose rank<k>/ is then chosen; Error when its shard count is not
// `world_size` or it was converted for other tensor / expert parallel sizes than the run's
// (saying how it was converted and how to run it).
std::string rank_checkpoint_dir(const std::string& dir, int rank, int world_size,
                                int64_t tensor_parallel = 1, int64_t expert_parallel = 1);

}  // namespace deepinfer::io
