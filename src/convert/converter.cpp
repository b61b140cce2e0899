#include "convert/converter.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "config/progress.h"
#include "convert/offline_rank.h"
#include "convert/precision.h"
#include "convert/recorded_weights.h"
#include "convert/torch_pickle.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/text_file.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"
#include "parallel/parallel_context.h"

namespace deepinfer::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kTensorAlignment = 64;  // block tensors start here: aligned SIMD loads
constexpr uint16_t kF16Max = 0x7bff;     // 65504

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Weight and index files are never copied: the converter writes its own.
bool is_weight_file(const std::string& name) {
  for (const char* ext : {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5",
                          ".msgpack", ".index.json"}) {
    const std::string e(ext);
    if (name.size() >= e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0)
      return true;
  }
  return name == "config.json" || name == io::kManifestFile;
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open to sync: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) fail(path, ": fsync failed: ", std::strerror(saved));
}

void write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, ": cannot create: ", std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      fail(path, ": write failed: ", std::strerror(saved));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int saved = errno;
  if (::close(fd) != 0 || !synced) fail(path, ": write failed: ", std::strerror(saved));
}

// The source's identity: sha256 over its config.json, every weight file's size and its
// header (safetensors) or pickle (torch.save), in name order. Cheap: no tensor data is read.
std::string source_hash(const std::string& dir, const std::vector<std::string>& weight_files,
                        bool torch_bin) {
  Sha256 hash;
  hash.update(read_text_file((fs::path(dir) / "config.json").string()));
  for (const auto& file : weight_files) {
    const auto mapped = MappedFile::open(file);
    hash.update(fs::path(file).filename().string());
    hash.update(std::to_string(mapped->size()));
    if (!torch_bin && mapped->size() >= 8) {
      uint64_t header = 0;
      for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<uint8_t>(mapped->data()[i]);
      hash.update(mapped->data(), std::min<uint64_t>(8 + header, mapped->size()));
    } else {
      hash.update(mapped->data(), std::min<size_t>(mapped->size(), 1 << 20));
    }
  }
  return hash.hex_digest();
}

std::vector<std::string> files_matching(const std::string& dir, const std::string& prefix,
                                        const std::string& suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && name.rfind(prefix, 0) == 0 && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// bf16 / f32 values beyond f16's range became +-inf in the f16 copy: clamp them to +-65504 and
// count them. Borrowed tensors are the source's own f16 values, not conversions.
int64_t clamp_f16_overflows(const Tensor& t) {
  if (t.dtype() != DType::f16 || t.is_borrowed()) return 0;
  auto* bits = static_cast<uint16_t*>(t.raw());
  int64_t count = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if ((bits[i] & 0x7fffu) == 0x7c00u) {
      bits[i] = static_cast<uint16_t>((bits[i] & 0x8000u) | kF16Max);
      ++count;
    }
  }
  return count;
}

struct Source {
  std::string checkpoint_dir;  // safetensors: the input, or a staging copy of the .bin tensors
  std::string sha256;
};

// pytorch_model*.bin read by the restricted reader and staged as one safetensors file in the
// temporary output directory (removed before it is renamed into place).
Source stage_source(const std::string& input, const std::string& staging) {
  const fs::path root(input);
  if (is_file(root / "model.safetensors") || is_file(root / "model.safetensors.index.json")) {
    return {input, source_hash(input, io::Checkpoint::weight_files(input), false)};
  }
  const std::vector<std::string> bins = files_matching(input, "pytorch_model", ".bin");
  if (bins.empty()) {
    fail(input,
         ": no model.safetensors, model.safetensors.index.json or pytorch_model*.bin; is "
         "this a Hugging Face model directory?");
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> names;
  for (const auto& bin : bins) {
    for (auto& [name, tensor] : read_torch_state_dict(bin)) {
      DI_CHECK(names.insert(name).second, input, ": tensor \"", name, "\" appears in two files");
      tensors.emplace_back(name, std::move(tensor));
    }
  }
  fs::create_directories(staging);
  io::write_safetensors((fs::path(staging) / "model.safetensors").string(), tensors);
  fs::copy_file(root / "config.json", fs::path(staging) / "config.json");
  log::info(input, ": read ", tensors.size(), " tensors from ", bins.size(),
            " pytorch_model*.bin file(s) (restricted reader: no code run)");
  return {staging, source_hash(input, bins, true)};
}

// config.json for the output: the source's, with the quantization_config of what the output
// holds: none after a float or block precision (FP8 blocks and int8 rows are dequantized), the
// FP8 block layout for fp8 (the source's when it was FP8 already: its bytes are kept), SGLang's
// w8a8_int8 for w8a8 (I8 `weight` + f32 `weight_scale` [rows, 1], what the loader maps back);
// with dtype set for float precisions.
json output_config(const io::ModelConfig& config, const Precision& precision) {
  json out = config.raw;
  const auto q = out.find("quantization_config");
  const bool source_fp8 = q != out.end() && q->is_object() && q->value("quant_method", "") == "fp8";
  if (!(precision.name == "fp8" && source_fp8)) out.erase("quantization_config");
  if (precision.name == "fp8" && !source_fp8) {
    out["quantization_config"] = {{"quant_method", "fp8"},
                                  {"fmt", "e4m3"},
                                  {"activation_scheme", "dynamic"},
                                  {"weight_block_size", {128, 128}}};
  } else if (precision.name == "w8a8") {
    out["quantization_config"] = {{"quant_method", "w8a8_int8"}, {"activation_scheme", "dynamic"}};
  }
  if (precision.load.weight_dtype) {
    const char* names[] = {"float32", "float16", "bfloat16"};
    const DType d = *precision.load.weight_dtype;
    out[out.contains("torch_dtype") && !out.contains("dtype") ? "torch_dtype" : "dtype"] =
        names[d == DType::f32   ? 0
              : d == DType::f16 ? 1
                                : 2];
  }
  return out;
}

struct Writer {
  const ConvertOptions& options;
  const std::string& input_dir;
  const json& config;
  io::Manifest base;

  // config.json, the source's other small files (tokenizer, generation config, ...), and the
  // manifest listing them with their sizes and hashes (written last).
  void finish_dir(const std::string& dir, io::Manifest manifest) const {
    write_file((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(input_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file(ec) || is_weight_file(name)) continue;
      const fs::path target = fs::path(dir) / name;
      fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing);
      fsync_path(target.string(), false);
    }
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string path = entry.path().string();
      manifest.files[entry.path().filename().string()] = {static_cast<uint64_t>(entry.file_size()),
                                                          sha256_file(path)};
    }
    write_file((fs::path(dir) / io::kManifestFile).string(),
               io::manifest_to_json(manifest).dump(2) + "\n");
    fsync_path(dir, true);
  }

  // The tensors in model-0000k-of-0000n.safetensors files of at most max_shard_bytes each,
  // an index, then finish_dir.
  int64_t write_dir(const std::string& dir, const std::vector<RecordedTensor>& tensors,
                    io::Manifest manifest, const std::string& label) const {
    fs::create_directories(dir);
    uint64_t all = 0, done = 0;
    for (const RecordedTensor& t : tensors) all += t.tensor.nbytes();
    config::ProgressBar bar(label, all, options.progress);
    std::vector<std::vector<const RecordedTensor*>> shards(1);
    uint64_t shard_bytes = 0, total = 0;
    int64_t overflows = 0;
    for (const RecordedTensor& t : tensors) {
      const uint64_t bytes = t.tensor.nbytes();
      if (!shards.back().empty() && shard_bytes + bytes > options.max_shard_bytes) {
        shards.emplace_back();
        shard_bytes = 0;
      }
      shards.back().push_back(&t);
      shard_bytes += bytes;
      total += bytes;
      overflows += clamp_f16_overflows(t.tensor);
      if (t.slice) manifest.sliced[t.name] = *t.slice;
    }
    json weight_map = json::object();
    const std::map<std::string, std::string> metadata = {
        {"format", "pt"}, {io::kConvertedShardKey, std::to_string(io::kManifestFormatVersion)}};
    for (size_t s = 0; s < shards.size(); ++s) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      std::vector<std::pair<std::string, Tensor>> entries;
      for (const RecordedTensor* t : shards[s]) {
        entries.emplace_back(t->name, t->tensor);
        weight_map[t->name] = name;
        done += t->tensor.nbytes();
      }
      io::write_safetensors((fs::path(dir) / name).string(), entries, metadata, kTensorAlignment);
      bar.update(done);
    }
    bar.finish();
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(2) + "\n");
    manifest.fp16_overflows = overflows;
    finish_dir(dir, std::move(manifest));
    return overflows;
  }
};

void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

// <output>.tmp-<pid> / .old-<pid> of a conversion whose process is gone (killed, power loss):
// never a finished checkpoint, so they are removed before a new run.
void remove_leftovers(const std::string& output) {
  const fs::path target(output);
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string base = target.filename().string();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    for (const char* tag : {".tmp-", ".old-"}) {
      const std::string prefix = base + tag;
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string pid = name.substr(prefix.size());
      if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
      if (::kill(static_cast<pid_t>(std::stoi(pid)), 0) == 0 || errno != ESRCH) continue;
      log::info("removing ", entry.path().string(), ", left by an interrupted conversion");
      remove_quietly(entry.path().string());
    }
  }
}

}  // namespace

ConvertSummary convert_checkpoint(const ConvertOptions& options) {
  Precision precision = parse_precision(options.precision);
  if (options.quantize_lm_head) {
    DI_CHECK(precision.load.quantization, "--quantize_lm_head goes with a block --precision (",
             "q8_0, q4_0, ..., q4_k_m), not with ", precision.name);
    precision.load.quantization = model::with_lm_head(*precision.load.quantization);
    precision.name += "+lm_head";
  }
  DI_CHECK(options.tp_size >= 1 && options.ep_size >= 1, "--tp-size and --ep-size must be >= 1");
  // The layout of `mpirun -np N deepinfer ... -tp T --expert-parallel-size E`: N = max(T, E)
  // ranks (docs/DISTRIBUTED.md, "Layout"), refused here as a run would refuse it.
  parallel::ParallelRequest request;
  request.tensor = {options.tp_size, "--tp-size"};
  request.expert = {options.ep_size, "--ep-size"};
  const parallel::ParallelSizes layout =
      parallel::ParallelSizes::resolve(request, parallel::ParallelSizes::world_for(request));
  DI_CHECK(options.max_shard_bytes > 0, "--max-shard-size must be positive");
  std::error_code ec;
  DI_CHECK(fs::is_directory(options.input_dir, ec), "--input_dir ", options.input_dir,
           ": not a directory (expected a Hugging Face model directory)");
  DI_CHECK(is_file(fs::path(options.input_dir) / "config.json"), "--input_dir ", options.input_dir,
           ": no config.json; is this a Hugging Face model directory?");
  std::string output = fs::path(options.output_dir).lexically_normal().string();
  while (output.size() > 1 && output.back() == '/') output.pop_back();
  DI_CHECK(!output.empty() && output != "." && output != "/", "--output_dir '", options.output_dir,
           "' is not a directory to create");
  const bool exists = fs::exists(output, ec);
  DI_CHECK(!exists || options.force, output,
           ": already exists; pass --force to replace it (its contents are removed)");
  DI_CHECK(!exists || !fs::equivalent(output, options.input_dir, ec), output,
           ": is the input directory; convert into another directory");

  // Everything is written beside the target and renamed into place when complete: an
  // interrupted run leaves only <output>.tmp-<pid>, never a directory that looks finished.
  const std::string tmp = str_cat(output, ".tmp-", ::getpid());
  remove_leftovers(output);
  remove_quietly(tmp);
  const fs::path parent = fs::path(output).parent_path();
  try {
    if (!parent.empty()) fs::create_directories(parent);
    fs::create_directories(tmp);
    const std::string staging = tmp + "/.source";
    const Source source = stage_source(options.input_dir, staging);
    const io::ModelConfig config = io::ModelConfig::load(options.input_dir);
    const json out_config = output_config(config, precision);
    const io::Checkpoint checkpoint = io::Checkpoint::open(source.checkpoint_dir);

    io::Manifest base;
    base.tool = str_cat("deepinfer convert ", DEEPINFER_VERSION);
    base.source_dir = fs::absolute(options.input_dir).lexically_normal().string();
    base.source_sha256 = source.sha256;
    base.precision = precision.name;
    base.moe_optimization = options.moe_optimization;
    base.tp_size = options.tp_size;
    base.ep_size = options.ep_size;
    base.tensor_alignment = static_cast<int64_t>(kTensorAlignment);

    const int ranks = static_cast<int>(layout.world);
    const Writer writer{options, options.input_dir, out_config, base};
    ConvertSummary summary;
    summary.ranks = ranks;
    summary.precision = precision.name;
    io::Manifest top = base;
    for (int rank = 0; rank < ranks; ++rank) {
      model::LoadOptions load = model::shaped_load_options(precision.load, config);
      if (ranks > 1) load.parallel = offline_rank_context(layout, rank);
      model::WeightLoader weights(checkpoint, load);
      RecordedWeights recorded;
      weights.set_recorder(&recorded);
      auto model = model::build_model(config, weights);
      if (const auto unused = weights.unused(); !unused.empty() && rank == 0) {
        log::warn(options.input_dir, ": ", unused.size(),
                  " tensors no layer uses are not written (first: ", unused.front(), ")");
      }
      const std::vector<RecordedTensor> tensors = recorded.tensors(options.moe_optimization);
      io::Manifest manifest = base;
      std::string dir = tmp;
      if (ranks > 1) {
        manifest.rank = rank;
        top.ranks.push_back(str_cat("rank", rank));
        dir = tmp + "/" + top.ranks.back();
      }
      summary.fp16_overflows += writer.write_dir(
          dir, tensors, manifest,
          ranks > 1 ? str_cat("writing rank ", rank, " of ", ranks) : std::string("writing"));
      summary.tensors += static_cast<int64_t>(tensors.size());
      for (const auto& t : tensors) summary.bytes += t.tensor.nbytes();
    }
    remove_quietly(staging);
    if (ranks > 1) {
      top.fp16_overflows = summary.fp16_overflows;
      writer.finish_dir(tmp, top);
    }
    // --force: the old directory moves aside first and goes once the new one is in place.
    const std::string old = str_cat(output, ".old-", ::getpid());
    if (exists && ::rename(output.c_str(), old.c_str()) != 0)
      fail(output, ": cannot move the existing directory aside: ", std::strerror(errno));
    if (::rename(tmp.c_str(), output.c_str()) != 0)
      fail(output, ": cannot rename ", tmp, " into place: ", std::strerror(errno));
    fsync_path(parent.empty() ? "." : parent.string(), true);
    if (exists) remove_quietly(old);
    return summary;
  } catch (const Error& e) {
    remove_quietly(tmp);
    fail("convert ", options.input_dir, " -> ", output, " failed, nothing written: ", e.what());
  } catch (const fs::filesystem_error& e) {
    remove_quietly(tmp);
    fail("convert ", options.input_dir, " -> ", output, " failed, nothing written: ", e.what());
  }
}

int64_t verify_converted_dir(const std::string& dir) {
  const auto manifest = io::read_manifest(dir);
  DI_CHECK(manifest.has_value(), dir, ": no ", io::kManifestFile,
           "; not a finished deepinfer convert output");
  io::verify_converted(dir, *manifest, true);
  int64_t files = static_cast<int64_t>(manifest->files.size());
  for (const auto& rank : manifest->ranks) {
    files += static_cast<int64_t>(io::read_manifest(dir + "/" + rank)->files.size());
  }
  return files;
}

}  // namespace deepinfer::convert
