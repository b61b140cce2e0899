// Checkpoint: a model directory holding model.safetensors or shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "core/text_file.h"
#include "io/gguf_model.h"
#include "io/gguf_tensors.h"
#include "io/safetensors.h"

namespace deepinfer::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

[[noreturn]] void fail_no_checkpoint(const std::string& dir) {
  const fs::path root(dir);
  if (is_file(root / "pytorch_model.bin") || is_file(root / "pytorch_model.bin.index.json")) {
    fail(dir,
         ": has only a PyTorch pickle checkpoint (pytorch_model.bin), which is not supported; "
         "convert it to safetensors first (a `deepinfer convert` command is planned; until then "
         "load it in transformers and call save_pretrained(dir, safe_serialization=True))");
  }
  fail(dir, ": no ", kSingleFile, " or ", kIndexFile,
       " found; is this a Hugging Face model directory?");
}

// Shard names come from a downloaded file: keep them inside the model directory.
void check_shard_name(const std::string& shard, const std::string& index_path,
                      const std::string& tensor) {
  const fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute();
  for (const auto& part : p) escapes = escapes || part == "..";
  if (escapes) {
    fail(index_path, ": weight_map: tensor \"", tensor, "\" names shard \"", shard,
         "\", which is not a file name inside the model directory");
  }
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir, const MemoryOptions& memory) {
  if (const auto gguf = gguf_model_file(dir)) {
    Checkpoint ckpt;
    ckpt.dir_ = dir;
    ckpt.gguf_ = GgufTensors::open(*gguf, memory);
    return ckpt;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir, ": not a directory (expected a model directory)");
  const fs::path root(dir);
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  const bool converted = ckpt.check_manifest();

  if (is_file(root / kSingleFile)) {
    ckpt.files_.push_back(SafetensorsFile::open((root / kSingleFile).string(), memory));
    for (const TensorInfo& t : ckpt.files_[0].tensors()) ckpt.owner_.emplace(t.name, 0);
    if (!converted) ckpt.refuse_unlisted_conversion();
    ckpt.expose_text_model();
    return ckpt;
  }
  if (!is_file(root / kIndexFile)) fail_no_checkpoint(dir);

  const std::string index_path = (root / kIndexFile).string();
  const nlohmann::json index = read_json_file(index_path);
  if (!index.is_object()) fail(index_path, ": must be a JSON object, got ", index.type_name());
  const auto map_it = index.find("weight_map");
  if (map_it == index.end()) fail(index_path, ": missing \"weight_map\"");
  if (!map_it->is_object()) {
    fail(index_path, ": \"weight_map\" must be an object {tensor: shard file}, got ",
         map_it->type_name());
  }
  if (map_it->empty()) fail(index_path, ": \"weight_map\" is empty");

  std::map<std::string, std::string> wanted;  // tensor -> shard
  std::map<std::string, size_t> shard_index;  // shard -> index into files_
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string()) {
      fail(index_path, ": weight_map: tensor \"", tensor, "\" must map to a shard file name, got ",
           shard.type_name());
    }
    const auto& name = shard.get_ref<const std::string&>();
    check_shard_name(name, index_path, tensor);
    wanted.emplace(tensor, name);
    if (shard_index.count(name)) continue;
    const fs::path shard_path = root / name;
    if (!is_file(shard_path)) {
      fail(index_path, ": shard \"", name, "\" (holding tensor \"", tensor,
           "\") does not exist in ", dir, "; the download is incomplete");
    }
    shard_index.emplace(name, ckpt.files_.size());
    ckpt.files_.push_back(SafetensorsFile::open(shard_path.string(), memory));
  }

  // Every tensor of every shard is loadable (as transformers does); one name in two shards
  // would make the result depend on the load order, so it is an error.
  for (const auto& [name, file_index] : shard_index) {
    for (const TensorInfo& t : ckpt.files_[file_index].tensors()) {
      const auto [it, inserted] = ckpt.owner_.emplace(t.name, file_index);
      if (!inserted) {
        fail(dir, ": tensor \"", t.name, "\" appears in two shards, ",
             ckpt.files_[it->second].path(), " and ", ckpt.files_[file_index].path());
      }
    }
  }
  for (const auto& [tensor, shard] : wanted) {
    const SafetensorsFile& file = ckpt.files_[shard_index.at(shard)];
    if (!file.contains(tensor)) {
      fail(index_path, ": tensor \"", tensor, "\" is listed in shard \"", shard,
           "\" but that file has no such tensor");
    }
  }
  if (!converted) ckpt.refuse_unlisted_conversion();
  ckpt.expose_text_model();
  return ckpt;
}

void Checkpoint::expose_text_model() {
  // (stored prefix, exposed prefix); lm_head.weight itself is the text model's in both layouts.
  static const std::pair<std::string_view, std::string_view> kTextPrefixes[] = {
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
      {"model.language_model.", "model."},
      {"lm_head.", "lm_head."}};
  if (owner_.count("model.embed_tokens.weight") != 0) return;
  const bool wrapped = owner_.count("language_model.model.embed_tokens.weight") != 0 ||
                       owner_.count("model.language_model.embed_tokens.weight") != 0;
  if (!wrapped) return;
  std::map<std::string, size_t> exposed;
  size_t left_out = 0;
  for (const auto& [name, file] : owner_) {
    bool text = false;
    for (const auto& [stored, as] : kTextPrefixes) {
      if (name.compare(0, stored.size(), stored) != 0) continue;
      const std::string public_name = std::string(as) + name.substr(stored.size());
      exposed.emplace(public_name, file);
      stored_names_.emplace(public_name, name);
      text = true;
      break;
    }
    if (!text) ++left_out;
  }
  owner_ = std::move(exposed);
  if (left_out > 0)
    log::info(dir_, ": a multimodal checkpoint: its text model is served; ", left_out,
              " tensors of the vision tower and projector are not loaded");
}

const std::string& Checkpoint::stored_name(const std::string& name) const {
  const auto it = stored_names_.find(name);
  return it == stored_names_.end() ? name : it->second;
}

bool Checkpoint::check_manifest() {
  const auto manifest = read_manifest(dir_);
  if (!manifest) return false;
  if (!manifest->ranks.empty()) {
    fail(dir_, ": converted into ", manifest->ranks.size(), " per-rank shards (--tp-size ",
         manifest->tp_size, " --ep-size ", manifest->ep_size, "); run it under mpirun -n ",
         manifest->ranks.size(), " (docs/DISTRIBUTED.md), or open one rank's directory (", dir_,
         "/", manifest->ranks.front(), ", ...)");
  }
  // Sizes always (cheap), before any file is parsed; the sha256 of every file (which reads
  // every byte) with DEEPINFER_VERIFY_CHECKPOINT=1 or `deepinfer convert --verify DIR`.
  const char* verify = std::getenv("DEEPINFER_VERIFY_CHECKPOINT");
  verify_converted(dir_, *manifest, verify != nullptr && std::string(verify) == "1");
  slices_ = manifest->sliced;
  return true;
}

void Checkpoint::refuse_unlisted_conversion() const {
  for (const SafetensorsFile& file : files_) {
    if (file.metadata().count(kConvertedShardKey)) {
      fail(dir_, ": ", file.path(), " was written by deepinfer convert, but the directory has no ",
           kManifestFile,
           "; the conversion did not finish or the directory is an incomplete copy: convert "
           "again");
    }
  }
}

std::optional<TensorSlice> Checkpoint::slice(const std::string& name) const {
  const auto it = slices_.find(name);
  if (it == slices_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Checkpoint::weight_files(const std::string& path) {
  if (const auto gguf = gguf_model_file(path)) return {*gguf};
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".safetensors") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool Checkpoint::contains(const std::string& name) const {
  if (gguf_) return gguf_->contains(name);
  return owner_.count(name) != 0;
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  if (gguf_) return gguf_->info(name);
  const auto it = owner_.find(name);
  if (it == owner_.end()) fail(dir_, ": checkpoint has no tensor named \"", name, "\"");
  return files_[it->second].info(stored_name(name));
}

Tensor Checkpoint::get(const std::string& name) const {
  if (gguf_) return gguf_->get(name);
  const auto it = owner_.find(name);
  if (it == owner_.end()) fail(dir_, ": checkpoint has no tensor named \"", name, "\"");
  return files_[it->second].get(stored_name(name));
}

std::vector<std::string> Checkpoint::names() const {
  if (gguf_) return gguf_->names();
  std::vector<std::string> out;
  out.reserve(owner_.size());
  for (const auto& entry : owner_) out.push_back(entry.first);
  return out;
}

size_t Checkpoint::total_bytes() const {
  if (gguf_) return gguf_->total_bytes();
  size_t total = 0;
  for (const SafetensorsFile& file : files_) {
    for (const TensorInfo& t : file.tensors()) total += t.data_end - t.data_begin;
  }
  return total;
}

std::map<std::string, size_t> Checkpoint::bytes_by_type() const {
  if (gguf_) return gguf_->bytes_by_type();
  std::map<std::string, size_t> out;
  for (const SafetensorsFile& file : files_) {
    for (const TensorInfo& t : file.tensors()) {
      out[std::string(safetensors_dtype_name(t.dtype))] += t.data_end - t.data_begin;
    }
  }
  return out;
}

}  // namespace deepinfer::io
