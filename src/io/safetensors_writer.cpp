// write_safetensors: byte for byte what the reference writer (huggingface/safetensors,
// tensor.rs `prepare`) produces: tensors ordered by its dtype ranking (widest first, which
// keeps every tensor aligned to its element size), then by name; compact JSON with
// "__metadata__" first and fields in the order dtype, shape, data_offsets; header padded with
// spaces to a multiple of 8. Written to a temporary file that is renamed over `path` only once
// complete, so a crash never leaves a half-written checkpoint.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace deepinfer::io {
namespace {

// The reference's Dtype enum order ("increasing alignment"); it sorts by it, descending.
int reference_rank(DType dtype) {
  switch (dtype) {
    case DType::boolean:
      return 0;
    case DType::u8:
      return 1;
    case DType::i8:
      return 2;
    case DType::f8_e4m3:
      return 4;
    case DType::f16:
      return 7;
    case DType::bf16:
      return 8;
    case DType::i32:
      return 9;
    case DType::f32:
      return 11;
    case DType::i64:
      return 13;
    case DType::q8_0:  // our block types (not in the reference): after every element type
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
      break;
  }
  return -1;
}

class TempFile {
 public:
  explicit TempFile(const std::string& final_path) : final_(final_path) {
    static std::atomic<unsigned> counter{0};
    path_ = str_cat(final_path, ".tmp.", ::getpid(), ".", counter++);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(final_, ": cannot create temporary file ", path_, ": ", std::strerror(errno));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(final_, ": write failed: ", std::strerror(errno));
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail(final_, ": fsync failed: ", std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(final_, ": close failed: ", std::strerror(errno));
    if (::rename(path_.c_str(), final_.c_str()) != 0) {
      fail(final_, ": cannot rename ", path_, " into place: ", std::strerror(errno));
    }
    committed_ = true;
  }

 private:
  std::string final_;
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata, size_t alignment) {
  DI_CHECK(alignment == 0 || (alignment % 8 == 0 && (alignment & (alignment - 1)) == 0), path,
           ": alignment ", alignment, " is not a power of two >= 8");
  std::vector<const std::pair<std::string, Tensor>*> order;
  std::set<std::string> names;
  for (const auto& entry : tensors) {
    const auto& [name, t] = entry;
    if (name == "__metadata__") fail(path, ": \"__metadata__\" cannot be a tensor name");
    if (!names.insert(name).second) fail(path, ": tensor \"", name, "\" given twice");
    if (!t.defined()) fail(path, ": tensor \"", name, "\" is undefined");
    if (!t.is_contiguous()) fail(path, ": tensor \"", name, "\" is not contiguous");
    order.push_back(&entry);
  }
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    const int ra = reference_rank(a->second.dtype()), rb = reference_rank(b->second.dtype());
    return ra != rb ? ra > rb : a->first < b->first;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  std::vector<size_t> begins;
  for (const auto* entry : order) {
    const Tensor& t = entry->second;
    // Block tensors start at an aligned offset (gap of zeros before them) so the mapped blocks
    // suit aligned SIMD loads; element tensors keep the reference's tiling, so a file without
    // block types stays readable by the reference reader, which allows no gaps.
    if (alignment > 0 && is_block_dtype(t.dtype()))
      offset = (offset + alignment - 1) / alignment * alignment;
    begins.push_back(offset);
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = safetensors_dtype_name(t.dtype());
    info["shape"] = t.shape();
    info["data_offsets"] = {offset, offset + t.nbytes()};
    header[entry->first] = std::move(info);
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": cannot encode the header (tensor names must be UTF-8): ", e.what());
  }
  // With an alignment the data section itself starts aligned: 8 + header bytes is padded to it.
  const size_t pad_to = std::max<size_t>(alignment, 8);
  text.append((pad_to - (8 + text.size()) % pad_to) % pad_to, ' ');

  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  TempFile out(path);
  out.write(length, sizeof(length));
  out.write(text.data(), text.size());
  size_t written = 0;
  static const std::byte zeros[64] = {};
  for (size_t i = 0; i < order.size(); ++i) {
    const Tensor& t = order[i]->second;
    for (; written < begins[i]; written += std::min<size_t>(64, begins[i] - written))
      out.write(zeros, std::min<size_t>(64, begins[i] - written));
    if (t.nbytes() > 0) out.write(t.raw(), t.nbytes());
    written += t.nbytes();
  }
  out.commit();
}

}  // namespace deepinfer::io
