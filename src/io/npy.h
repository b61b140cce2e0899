#pragma once
// NumPy .npy (format 1.0) writer for float32 arrays, e.g. `generate --dump-logits`.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::io {

// Writes a little-endian float32 array of the given shape; atomically (temp + rename).
void write_npy_f32(const std::string& path, std::span<const float> data,
                   const std::vector<int64_t>& shape);

}  // namespace deepinfer::io
