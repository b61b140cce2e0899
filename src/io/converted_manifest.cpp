#include "io/converted_manifest.h"

#include <filesystem>

#include "core/error.h"
#include "core/sha256.h"
#include "core/text_file.h"

namespace deepinfer::io {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const json& member(const json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) fail(path, ": missing \"", key, "\"");
  return *it;
}

template <typename T>
T member_as(const json& object, const char* key, const std::string& path) {
  const json& value = member(object, key, path);
  try {
    return value.get<T>();
  } catch (const json::exception&) {
    fail(path, ": \"", key, "\" has the wrong type (", value.type_name(), " ", value.dump(), ")");
  }
}

bool plain_file_name(const std::string& name) {
  const fs::path p(name);
  return !name.empty() && !p.is_absolute() && p.has_filename() && p.filename() == p &&
         name != "." && name != "..";
}

}  // namespace

json manifest_to_json(const Manifest& m) {
  json out = json::object();
  out["format"] = "deepinfer converted checkpoint";
  out["format_version"] = m.format_version;
  out["tool"] = m.tool;
  out["source"] = {{"dir", m.source_dir}, {"sha256", m.source_sha256}};
  out["precision"] = m.precision;
  out["moe_optimization"] = m.moe_optimization;
  out["tp_size"] = m.tp_size;
  out["ep_size"] = m.ep_size;
  if (m.rank) out["rank"] = *m.rank;
  if (!m.ranks.empty()) out["ranks"] = m.ranks;
  out["tensor_alignment"] = m.tensor_alignment;
  out["fp16_overflows"] = m.fp16_overflows;
  json files = json::object();
  for (const auto& [name, f] : m.files) files[name] = {{"size", f.size}, {"sha256", f.sha256}};
  out["files"] = std::move(files);
  json sliced = json::object();
  for (const auto& [name, s] : m.sliced) {
    sliced[name] = {{"dim", s.dim}, {"begin", s.begin}, {"end", s.end}, {"full", s.full}};
  }
  out["sliced_tensors"] = std::move(sliced);
  return out;
}

Manifest manifest_from_json(const json& j, const std::string& path) {
  if (!j.is_object()) fail(path, ": must be a JSON object, got ", j.type_name());
  Manifest m;
  m.format_version = member_as<int>(j, "format_version", path);
  if (m.format_version != kManifestFormatVersion) {
    fail(path, ": format version ", m.format_version, ", but this deepinfer reads version ",
         kManifestFormatVersion, " only; convert the checkpoint again with this build");
  }
  m.tool = member_as<std::string>(j, "tool", path);
  const json& source = member(j, "source", path);
  if (!source.is_object()) fail(path, ": \"source\" must be an object");
  m.source_dir = member_as<std::string>(source, "dir", path);
  m.source_sha256 = member_as<std::string>(source, "sha256", path);
  m.precision = member_as<std::string>(j, "precision", path);
  m.moe_optimization = member_as<bool>(j, "moe_optimization", path);
  m.tp_size = member_as<int64_t>(j, "tp_size", path);
  m.ep_size = member_as<int64_t>(j, "ep_size", path);
  if (j.contains("rank")) m.rank = member_as<int64_t>(j, "rank", path);
  if (j.contains("ranks")) m.ranks = member_as<std::vector<std::string>>(j, "ranks", path);
  m.tensor_alignment = member_as<int64_t>(j, "tensor_alignment", path);
  m.fp16_overflows = member_as<int64_t>(j, "fp16_overflows", path);
  const json& files = member(j, "files", path);
  if (!files.is_object()) fail(path, ": \"files\" must be an object {name: {size, sha256}}");
  for (const auto& [name, f] : files.items()) {
    if (!plain_file_name(name)) fail(path, ": \"files\": \"", name, "\" is not a plain file name");
    if (!f.is_object()) fail(path, ": \"files\": \"", name, "\" must be an object {size, sha256}");
    m.files[name] = {member_as<uint64_t>(f, "size", path),
                     member_as<std::string>(f, "sha256", path)};
  }
  for (const auto& rank : m.ranks) {
    if (!plain_file_name(rank)) fail(path, ": \"ranks\": \"", rank, "\" is not a directory name");
  }
  if (j.contains("sliced_tensors")) {
    const json& sliced = j["sliced_tensors"];
    if (!sliced.is_object()) fail(path, ": \"sliced_tensors\" must be an object");
    for (const auto& [name, s] : sliced.items()) {
      const TensorSlice slice{member_as<int>(s, "dim", path), member_as<int64_t>(s, "begin", path),
                              member_as<int64_t>(s, "end", path),
                              member_as<int64_t>(s, "full", path)};
      if (slice.dim < 0 || slice.begin < 0 || slice.begin >= slice.end || slice.end > slice.full) {
        fail(path, ": \"sliced_tensors\": \"", name, "\" is not a valid slice [", slice.begin, ", ",
             slice.end, ") of ", slice.full, " along dim ", slice.dim);
      }
      m.sliced.emplace(name, slice);
    }
  }
  return m;
}

std::optional<Manifest> read_manifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / kManifestFile;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  return manifest_from_json(read_json_file(path.string()), path.string());
}

void verify_converted(const std::string& dir, const Manifest& manifest, bool hashes) {
  const fs::path root(dir);
  const std::string where = (root / kManifestFile).string();
  for (const auto& [name, expected] : manifest.files) {
    const fs::path file = root / name;
    std::error_code ec;
    const uint64_t size = fs::file_size(file, ec);
    if (ec) {
      fail(file.string(), ": listed in ", where, " but missing (", ec.message(),
           "); the converted checkpoint is incomplete: convert it again");
    }
    if (size != expected.size) {
      fail(file.string(), ": ", size, " bytes, but ", where, " says ", expected.size,
           " (truncated or modified); convert the checkpoint again");
    }
    if (hashes) {
      const std::string actual = sha256_file(file.string());
      if (actual != expected.sha256) {
        fail(file.string(), ": sha256 ", actual, " does not match ", expected.sha256, " in ", where,
             " (corrupted or modified); convert the checkpoint again");
      }
    }
  }
  for (const auto& rank : manifest.ranks) {
    const std::string rank_dir = (root / rank).string();
    const auto inner = read_manifest(rank_dir);
    if (!inner) fail(rank_dir, ": rank directory listed in ", where, " has no ", kManifestFile);
    verify_converted(rank_dir, *inner, hashes);
  }
}

std::string rank_checkpoint_dir(const std::string& dir, int rank, int world_size,
                                int64_t tensor_parallel, int64_t expert_parallel) {
  const auto manifest = read_manifest(dir);
  if (!manifest || manifest->ranks.empty()) return dir;
  const auto shards = static_cast<int>(manifest->ranks.size());
  // How the conversion is run: the layout it was converted for.
  std::string how = str_cat("mpirun -n ", shards);
  if (manifest->tp_size > 1) how += str_cat(" -tp ", manifest->tp_size);
  if (manifest->ep_size > 1) how += str_cat(" --expert-parallel-size ", manifest->ep_size);
  if (shards != world_size) {
    fail(dir, ": converted into ", shards, " per-rank shards (--tp-size ", manifest->tp_size,
         " --ep-size ", manifest->ep_size, "), but this run has ", world_size,
         world_size == 1 ? " process" : " ranks", "; run it with ", how,
         " (docs/DISTRIBUTED.md), or convert again for ", world_size,
         world_size == 1 ? " process" : " ranks");
  }
  if (manifest->tp_size != tensor_parallel || manifest->ep_size != expert_parallel) {
    fail(dir, ": converted for --tp-size ", manifest->tp_size, " --ep-size ", manifest->ep_size,
         " but this run is tensor parallel ", tensor_parallel, ", expert parallel ",
         expert_parallel, ": each shard holds another rank's slices; run it with ", how,
         " (docs/DISTRIBUTED.md), or convert again for this layout");
  }
  return (fs::path(dir) / manifest->ranks[static_cast<size_t>(rank)]).string();
}

}  // namespace deepinfer::io
