// Fuzzes the GGUF header parser on arbitrary bytes. Errors are the expected outcome for
// garbage; a crash, a sanitizer report, any other exception, or an accepted header whose
// tensors are misplaced (outside the file, before the data section, overlapping, or of a size
// that disagrees with their type and shape) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  deepinfer::io::GgufHeader header;
  try {
    header = deepinfer::io::parse_gguf_header(file, "<fuzz input>");
  } catch (const deepinfer::Error&) {
    return 0;
  }
  // An accepted header: any Error from here on escapes and is reported as a crash.
  if (header.data_offset > size) std::abort();
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& t : header.tensors) {
    if (t.shape.empty() || t.shape.size() > 4) std::abort();
    const int64_t numel = deepinfer::shape_numel(t.shape);
    const int64_t row = t.shape.back();
    const size_t bytes = deepinfer::quant_row_bytes(t.type, row) * static_cast<size_t>(numel / row);
    if (t.data_begin < header.data_offset || t.data_begin > size ||
        t.nbytes > size - t.data_begin || t.nbytes != bytes) {
      std::abort();
    }
    ranges.emplace_back(t.data_begin, t.data_begin + t.nbytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) std::abort();
  }
  return 0;
}
