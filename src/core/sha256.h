#pragma once
// SHA-256 (FIPS 180-4), for the converted-checkpoint manifest's file hashes: streaming, so a
// multi-gigabyte shard is hashed in one pass without holding it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// The SHA-256 of a whole file, read in chunks; Error naming the file when it cannot be read.
// `progress` (may be null) is called with the bytes hashed so far.
std::string sha256_file(const std::string& path, void (*progress)(uint64_t, void*) = nullptr,
                        void* progress_context = nullptr);

}  // namespace deepinfer
