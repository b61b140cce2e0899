#include "config/rank_consistency.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "config/recipe_config.h"
#include "core/build_id.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;

// FNV-1a: a checksum, not a defence (ranks of one job are not adversaries).
struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* data, size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  }
  void add(const std::string& s) { add(s.data(), s.size()); }
  void add(uint64_t v) { add(&v, sizeof(v)); }
};

std::string read_prefix(const fs::path& path, uint64_t offset, uint64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  DI_CHECK(in.good(), "cannot read ", path.string());
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(bytes, '\0');
  in.read(out.data(), static_cast<std::streamsize>(bytes));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// The header of a safetensors file: its 8-byte little-endian length, then that much JSON.
std::string safetensors_header(const fs::path& path) {
  const std::string length_bytes = read_prefix(path, 0, 8);
  DI_CHECK(length_bytes.size() == 8, path.string(), ": shorter than a safetensors header");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(length_bytes[i]);
  DI_CHECK(length <= (uint64_t{100} << 20), path.string(), ": a safetensors header of ", length,
           " bytes (corrupt?)");
  return read_prefix(path, 8, length);
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

RankFingerprint fingerprint_of(const std::string& model_dir) {
  RankFingerprint f;
  Fnv build;
  build.add(build_id());
  f.build = build.h;
  const fs::path config_path = fs::path(model_dir) / "config.json";
  if (fs::is_directory(model_dir) && fs::is_regular_file(config_path)) {
    Fnv config;
    config.add(read_prefix(config_path, 0, fs::file_size(config_path)));
    f.config = config.h;
  }
  Fnv headers, sizes;
  const auto files = io::Checkpoint::weight_files(model_dir);
  sizes.add(static_cast<uint64_t>(files.size()));
  for (const auto& file : files) {
    const fs::path path(file);
    sizes.add(static_cast<uint64_t>(fs::file_size(path)));
    headers.add(path.filename().string());
    headers.add(path.extension() == ".safetensors" ? safetensors_header(path)
                                                   : read_prefix(path, 0, uint64_t{1} << 20));
  }
  f.headers = headers.h;
  f.sizes = sizes.h;
  return f;
}

std::optional<std::string> first_mismatch(std::span<const RankFingerprint> all) {
  for (size_t r = 1; r < all.size(); ++r) {
    const RankFingerprint& a = all[0];
    const RankFingerprint& b = all[r];
    std::string what;
    if (b.build != a.build) {
      what = str_cat("its deepinfer build differs (build id hash ", hex(b.build), " vs ",
                     hex(a.build), "): every rank must run the same binary");
    } else if (b.config != a.config) {
      what = str_cat("its config.json differs (hash ", hex(b.config), " vs ", hex(a.config),
                     "): every rank must load the same checkpoint");
    } else if (b.headers != a.headers) {
      what =
          "its safetensors headers differ (tensor names, dtypes, shapes or offsets): every "
          "rank must load the same checkpoint";
    } else if (b.sizes != a.sizes) {
      what = "its weight files differ in number or size: every rank must load the same checkpoint";
    }
    if (!what.empty()) return str_cat("rank ", r, " does not match rank 0: ", what);
  }
  return std::nullopt;
}

void check_ranks_agree(parallel::Communicator& world, const std::string& model_dir) {
  if (world.world_size() == 1) return;
  const RankFingerprint mine = fingerprint_of(model_dir);
  const std::vector<RankFingerprint> all =
      world.all_gather(std::span<const RankFingerprint>(&mine, 1));
  const auto mismatch = first_mismatch(all);
  if (!mismatch) return;
  if (world.rank() == 0) throw ConfigError(*mismatch);
  // Rank 0 prints the one line and ends the job; should it not within a minute, say it here.
  std::this_thread::sleep_for(std::chrono::seconds(60));
  throw ConfigError(*mismatch);
}

}  // namespace deepinfer::config
