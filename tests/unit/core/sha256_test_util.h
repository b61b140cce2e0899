#pragma once
// SHA-256 of a byte buffer as 64 lowercase hex digits, for tests that compare blocks with
// hashes committed by tools/ scripts (Python's hashlib.sha256): core/sha256.h, one shot.
#include <cstddef>
#include <string>

#include "core/sha256.h"

namespace deepinfer::testing {

inline std::string sha256_hex(const void* data, size_t size) {
  Sha256 hash;
  hash.update(data, size);
  return hash.hex_digest();
}

}  // namespace deepinfer::testing
