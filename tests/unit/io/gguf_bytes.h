#pragma once
// A test-only GGUF byte writer: little-endian fields appended in order, so tests can build
// valid files and every kind of malformed one (wrong counts, lengths, types, offsets).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::io::testing {

// GGUF metadata value type numbers.
enum GgufType : uint32_t {
  kGgufU8 = 0,
  kGgufI8 = 1,
  kGgufU16 = 2,
  kGgufI16 = 3,
  kGgufU32 = 4,
  kGgufI32 = 5,
  kGgufF32 = 6,
  kGgufBool = 7,
  kGgufString = 8,
  kGgufArray = 9,
  kGgufU64 = 10,
  kGgufI64 = 11,
  kGgufF64 = 12,
};

class GgufBytes {
 public:
  GgufBytes& uint(uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return uint(v, 1); }
  GgufBytes& u32(uint32_t v) { return uint(v, 4); }
  GgufBytes& u64(uint64_t v) { return uint(v, 8); }
  GgufBytes& raw(std::string_view bytes) {
    out_ += bytes;
    return *this;
  }
  GgufBytes& str(std::string_view s) { return u64(s.size()).raw(s); }

  // Magic, version, tensor count, metadata count.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(kGgufU32).u32(v); }
  GgufBytes& kv_string(std::string_view key, std::string_view v) {
    return str(key).u32(kGgufString).str(v);
  }
  // A tensor info; `ne` is ggml order (row length first).
  GgufBytes& tensor(std::string_view name, const std::vector<uint64_t>& ne, uint32_t ggml_type,
                    uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (const uint64_t d : ne) u64(d);
    return u32(ggml_type).u64(offset);
  }
  GgufBytes& pad(size_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back('\0');
    return *this;
  }
  GgufBytes& data(size_t n) {
    for (size_t i = 0; i < n; ++i) out_.push_back(static_cast<char>(i * 37 + 11));
    return *this;
  }

  size_t size() const { return out_.size(); }
  const std::string& bytes() const { return out_; }
  std::span<const std::byte> span() const {
    return {reinterpret_cast<const std::byte*>(out_.data()), out_.size()};
  }

 private:
  std::string out_;
};

}  // namespace deepinfer::io::testing
