// Fuzzes the safetensors header parser on arbitrary bytes. Errors are the expected outcome
// for garbage; a crash, a sanitizer report, any other exception, or an accepted header whose
// tensors do not fit the file is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto header = deepinfer::io::parse_safetensors_header(file, "<fuzz input>");
    for (const auto& t : header.tensors) {
      // Block types (Q8_0, ...) hold whole blocks per row, so rows x row bytes = bytes of numel.
      const auto bytes = deepinfer::dtype_bytes(t.dtype, deepinfer::shape_numel(t.shape));
      if (t.data_begin < header.data_offset || t.data_end > size ||
          t.data_end - t.data_begin != bytes) {
        std::abort();
      }
    }
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
