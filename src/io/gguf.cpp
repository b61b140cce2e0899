#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/printable.h"

// Validation follows llama.cpp's reader (ggml/src/gguf.cpp, gguf_init_from_reader): magic, a
// version that is neither 0, 1 (whose counts were 32-bit), newer than 3, nor byte-swapped (a
// big-endian file); unique non-empty keys; known value types, arrays not nested; general.alignment
// a u32 power of two; tensor names unique; at most 4 dims; a known ggml type whose block size
// divides ne[0]; element and byte counts without overflow; the data section at the aligned end
// of the tensor infos. Where llama.cpp bounds lengths by fixed limits (1 GiB strings, 2^30 array
// elements) we bound every count by the bytes that remain, so nothing is allocated that the file
// cannot fill. Deliberate differences: llama.cpp requires tensors packed in file order, we only
// require aligned offsets, tensors inside the file and no overlap (what reading needs); it allows
// zero-sized dims, empty tensor names and any nonzero byte as true, we refuse them.

namespace deepinfer::io {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
constexpr const char* kAlignmentKey = "general.alignment";

// GGUF metadata value types (gguf_type).
enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
constexpr const char* kValueTypeNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
constexpr uint32_t kValueTypeCount = 13;

// Fewest bytes one value of a (non-array) type takes: the bound for array element counts.
size_t min_value_bytes(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool:
      return 1;
    case kU16:
    case kI16:
      return 2;
    case kU32:
    case kI32:
    case kF32:
      return 4;
    case kString:  // its u64 length
    case kU64:
    case kI64:
    case kF64:
      return 8;
    default:
      return 0;
  }
}

// ggml type numbers we know by name but cannot read, for the error message.
std::string_view unsupported_ggml_type_name(uint32_t type) {
  switch (type) {
    case 4:
      return "Q4_2 (removed from ggml)";
    case 5:
      return "Q4_3 (removed from ggml)";
    case 16:
      return "IQ2_XXS";
    case 17:
      return "IQ2_XS";
    case 18:
      return "IQ3_XXS";
    case 19:
      return "IQ1_S";
    case 20:
      return "IQ4_NL";
    case 21:
      return "IQ3_S";
    case 22:
      return "IQ2_S";
    case 23:
      return "IQ4_XS";
    case 24:
      return "I8";
    case 25:
      return "I16";
    case 26:
      return "I32";
    case 27:
      return "I64";
    case 28:
      return "F64";
    case 29:
      return "IQ1_M";
    case 34:
      return "TQ1_0";
    case 35:
      return "TQ2_0";
    case 39:
      return "MXFP4";
    case 40:
      return "NVFP4";
    case 41:
      return "Q1_0";
    default:
      return {};
  }
}

// Little-endian reads from the file's bytes; every read is checked against what remains and
// names what it was reading, so a truncated file says where and in what it ends.
class Reader {
 public:
  Reader(std::span<const std::byte> file, const std::string& path) : file_(file), path_(path) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return file_.size() - pos_; }

  template <typename... What>
  void need(size_t n, const What&... what) const {
    if (n > remaining()) {
      fail(path_, ": file ends at byte ", file_.size(), " inside ", what..., ": ", n,
           " bytes needed at offset ", pos_, ", ", remaining(), " left; the file is truncated");
    }
  }

  template <typename... What>
  uint64_t uint(size_t n, const What&... what) {
    need(n, what...);
    uint64_t value = 0;
    for (size_t i = n; i-- > 0;) value = (value << 8) | static_cast<uint8_t>(file_[pos_ + i]);
    pos_ += n;
    return value;
  }
  template <typename... What>
  uint32_t u32(const What&... what) {
    return static_cast<uint32_t>(uint(4, what...));
  }
  template <typename... What>
  uint64_t u64(const What&... what) {
    return uint(8, what...);
  }

  // A u64 length then that many bytes; the length is checked before anything is copied.
  template <typename... What>
  std::string string(const What&... what) {
    const uint64_t length = u64(what..., " (string length)");
    if (length > remaining()) {
      fail(path_, ": ", what..., ": string length ", length, " exceeds the ", remaining(),
           " bytes left in the file (at offset ", pos_, "); the file is truncated or corrupt");
    }
    std::string out(reinterpret_cast<const char*>(file_.data()) + pos_, length);
    pos_ += length;
    return out;
  }

 private:
  std::span<const std::byte> file_;
  const std::string& path_;
  size_t pos_ = 0;
};

template <typename T>
T bit_cast_from(uint64_t bits) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<T>(static_cast<uint32_t>(bits));
  } else {
    return std::bit_cast<T>(bits);
  }
}

// One scalar of `type` (not an array): integers widened to int64_t / uint64_t, floats to double.
template <typename... What>
GgufValue read_scalar(Reader& in, uint32_t type, const std::string& path, const What&... what) {
  switch (type) {
    case kU8:
      return in.uint(1, what...);
    case kU16:
      return in.uint(2, what...);
    case kU32:
      return in.uint(4, what...);
    case kU64:
      return in.uint(8, what...);
    case kI8:
      return static_cast<int64_t>(static_cast<int8_t>(in.uint(1, what...)));
    case kI16:
      return static_cast<int64_t>(static_cast<int16_t>(in.uint(2, what...)));
    case kI32:
      return static_cast<int64_t>(static_cast<int32_t>(in.uint(4, what...)));
    case kI64:
      return static_cast<int64_t>(in.uint(8, what...));
    case kF32:
      return static_cast<double>(bit_cast_from<float>(in.uint(4, what...)));
    case kF64:
      return bit_cast_from<double>(in.uint(8, what...));
    case kBool: {
      const uint64_t byte = in.uint(1, what...);
      if (byte > 1) fail(path, ": ", what..., ": bool value ", byte, " is neither 0 nor 1");
      return byte == 1;
    }
    case kString:
      return in.string(what...);
    default:
      fail(path, ": ", what..., ": unknown value type ", type);
  }
}

template <typename T>
std::vector<T> read_elements(Reader& in, uint64_t count, uint32_t type, const std::string& path,
                             const std::string& where) {
  std::vector<T> values;
  values.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    values.push_back(std::get<T>(read_scalar(in, type, path, where, " element ", i)));
  }
  return values;
}

std::shared_ptr<const GgufArray> read_array(Reader& in, const std::string& path,
                                            const std::string& where) {
  const uint32_t type = in.u32(where, " (array element type)");
  if (type == kArray) fail(path, ": ", where, ": nested arrays are not supported");
  if (type >= kValueTypeCount) fail(path, ": ", where, ": unknown array element type ", type);
  const uint64_t count = in.u64(where, " (array length)");
  const size_t element_bytes = min_value_bytes(type);
  if (count > in.remaining() / element_bytes) {
    fail(path, ": ", where, ": array of ", count, " ", kValueTypeNames[type],
         " values needs at least ", element_bytes, " bytes each but only ", in.remaining(),
         " bytes are left; the file is truncated or corrupt");
  }
  auto array = std::make_shared<GgufArray>();
  switch (type) {
    case kU8:
    case kU16:
    case kU32:
    case kU64:
      array->values = read_elements<uint64_t>(in, count, type, path, where);
      break;
    case kI8:
    case kI16:
    case kI32:
    case kI64:
      array->values = read_elements<int64_t>(in, count, type, path, where);
      break;
    case kF32:
    case kF64:
      array->values = read_elements<double>(in, count, type, path, where);
      break;
    case kBool:
      array->values = read_elements<bool>(in, count, type, path, where);
      break;
    default:
      array->values = read_elements<std::string>(in, count, type, path, where);
      break;
  }
  return array;
}

void read_metadata(Reader& in, uint64_t count, GgufHeader& header, uint32_t& alignment,
                   const std::string& path) {
  for (uint64_t i = 0; i < count; ++i) {
    const std::string key = in.string("metadata key ", i);
    if (key.empty()) fail(path, ": metadata key ", i, " is empty");
    const std::string where = str_cat("metadata key \"", printable(key), "\"");
    if (header.metadata.count(key) != 0) fail(path, ": duplicate ", where);
    const uint32_t type = in.u32(where, " (value type)");
    if (type >= kValueTypeCount) fail(path, ": ", where, ": unknown value type ", type);
    GgufValue value = type == kArray ? GgufValue(read_array(in, path, where))
                                     : read_scalar(in, type, path, where);
    if (key == kAlignmentKey) {
      if (type != kU32) {
        fail(path, ": ", where, " must be a u32, got ", kValueTypeNames[type]);
      }
      const auto a = static_cast<uint32_t>(std::get<uint64_t>(value));
      if (!std::has_single_bit(a)) {
        fail(path, ": ", where, " is ", a, "; it must be a power of two");
      }
      alignment = a;
    }
    header.metadata.emplace(key, std::move(value));
  }
}

std::string ggml_type_description(uint32_t type) {
  const std::string_view name = unsupported_ggml_type_name(type);
  return name.empty() ? str_cat("ggml type ", type, ", which is unknown")
                      : str_cat("ggml type ", type, " (", name, "), which deepinfer cannot read");
}

GgufTensorInfo read_tensor_info(Reader& in, uint64_t index, uint32_t alignment,
                                const std::string& path) {
  GgufTensorInfo info;
  info.name = in.string("the name of tensor ", index);
  if (info.name.empty()) fail(path, ": tensor ", index, " has an empty name");
  const std::string where = str_cat("tensor \"", printable(info.name), "\"");
  const uint32_t n_dims = in.u32(where, " (dimension count)");
  if (n_dims < 1 || n_dims > kMaxDims) {
    fail(path, ": ", where, " has ", n_dims, " dimensions; GGUF tensors have 1 to ", kMaxDims);
  }
  int64_t ne[kMaxDims] = {};
  int64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim = in.u64(where, " (dimension ", d, ")");
    if (dim == 0) fail(path, ": ", where, " has dimension ", d, " = 0");
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, static_cast<int64_t>(dim), &numel)) {
      fail(path, ": ", where, ": dimension ", d, " = ", dim,
           " makes the element count overflow a 64-bit integer");
    }
    ne[d] = static_cast<int64_t>(dim);
  }
  const uint32_t type = in.u32(where, " (ggml type)");
  const std::optional<QuantTraits> traits = quant_traits(type);
  if (!traits) fail(path, ": ", where, " has ", ggml_type_description(type));
  info.type = traits->type;
  if (ne[0] % traits->block_size != 0) {
    fail(path, ": ", where, " is ", traits->name, " with rows of ", ne[0],
         " elements, not a multiple of its block size ", traits->block_size);
  }
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel / traits->block_size), traits->block_bytes,
                             &info.nbytes)) {
    fail(path, ": ", where, ": ", numel, " ", traits->name,
         " elements overflow a 64-bit byte count");
  }
  for (uint32_t d = n_dims; d-- > 0;) info.shape.push_back(ne[d]);
  const uint64_t offset = in.u64(where, " (data offset)");
  if (offset % alignment != 0) {
    fail(path, ": ", where, " has data offset ", offset, ", not a multiple of the alignment ",
         alignment);
  }
  info.data_begin = offset;  // relative until the data section is known
  return info;
}

// Places every tensor in the file: inside it, and no two sharing a byte.
void check_layout(GgufHeader& header, size_t file_size, const std::string& path) {
  const size_t data_size = file_size - header.data_offset;
  for (GgufTensorInfo& t : header.tensors) {
    const uint64_t offset = t.data_begin;
    if (offset > data_size || t.nbytes > data_size - offset) {
      fail(path, ": tensor \"", printable(t.name), "\" at data offset ", offset, " with ", t.nbytes,
           " bytes ends past the data section (", data_size,
           " bytes); the file is truncated or the tensor info is wrong");
    }
    t.data_begin = header.data_offset + offset;
  }
  std::vector<const GgufTensorInfo*> sorted;
  sorted.reserve(header.tensors.size());
  for (const GgufTensorInfo& t : header.tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    return a->data_begin < b->data_begin;
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const GgufTensorInfo& a = *sorted[i - 1];
    const GgufTensorInfo& b = *sorted[i];
    if (b.data_begin < a.data_begin + a.nbytes) {
      const size_t o = header.data_offset;
      fail(path, ": tensors \"", printable(a.name), "\" [", a.data_begin - o, ", ",
           a.data_begin - o + a.nbytes, ") and \"", printable(b.name), "\" [", b.data_begin - o,
           ", ", b.data_begin - o + b.nbytes, ") overlap");
    }
  }
}

const char* value_kind(const GgufValue& value) {
  constexpr const char* kKinds[] = {
      "an unsigned integer", "an integer", "a float", "a bool", "a string", "an array"};
  return kKinds[value.index()];
}

}  // namespace

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

GgufHeader parse_gguf_header(std::span<const std::byte> file, const std::string& path) {
  Reader in(file, path);
  in.need(4, "the magic (a GGUF file starts with \"GGUF\")");
  if (std::memcmp(file.data(), "GGUF", 4) != 0) {
    fail(path, ": not a GGUF file: it starts with \"",
         printable({reinterpret_cast<const char*>(file.data()), 4}), "\", not \"GGUF\"");
  }
  in.uint(4, "the magic");
  GgufHeader header;
  header.version = in.u32("the version");
  if ((header.version & 0xffffu) == 0 && header.version != 0) {
    fail(path, ": version field 0x", std::hex, header.version,
         " looks byte-swapped: this is a big-endian GGUF file; only little-endian files are "
         "supported");
  }
  if (header.version == 1) {
    fail(path,
         ": GGUF version 1 is not supported (it predates 64-bit counts); convert the model "
         "again with a current llama.cpp");
  }
  if (header.version != 2 && header.version != 3) {
    fail(path, ": GGUF version ", header.version, " is not supported (only versions 2 and 3)");
  }
  const uint64_t n_tensors = in.u64("the tensor count");
  const uint64_t n_kv = in.u64("the metadata count");

  // The smallest metadata entry: u64 key length, a 1-byte key, u32 type, a 1-byte value. The
  // smallest tensor info: u64 name length, 1-byte name, u32 n_dims, one u64 dim, u32 type, u64
  // offset. Counts that cannot fit are refused before anything is reserved for them.
  constexpr size_t kMinKvBytes = 8 + 1 + 4 + 1;
  constexpr size_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
  if (n_kv > in.remaining() / kMinKvBytes) {
    fail(path, ": metadata count ", n_kv, " cannot fit in the ", in.remaining(),
         " bytes left (each entry takes at least ", kMinKvBytes,
         "); the file is truncated or corrupt");
  }
  if (n_tensors > in.remaining() / kMinTensorInfoBytes) {
    fail(path, ": tensor count ", n_tensors, " cannot fit in the ", in.remaining(),
         " bytes left (each tensor info takes at least ", kMinTensorInfoBytes,
         "); the file is truncated or corrupt");
  }

  uint32_t alignment = kDefaultAlignment;
  read_metadata(in, n_kv, header, alignment, path);

  std::set<std::string> names;
  header.tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo info = read_tensor_info(in, i, alignment, path);
    if (!names.insert(info.name).second) {
      fail(path, ": duplicate tensor name \"", printable(info.name), "\"");
    }
    header.tensors.push_back(std::move(info));
  }

  const size_t end_of_infos = in.pos();
  header.data_offset = (end_of_infos + alignment - 1) / alignment * alignment;
  if (header.data_offset > file.size()) {
    // Without tensors there is no data section, and writers may omit its padding.
    if (!header.tensors.empty()) {
      fail(path, ": the data section would start at byte ", header.data_offset,
           " (the tensor infos end at ", end_of_infos, ", aligned to ", alignment,
           ") but the file has only ", file.size(), " bytes; the file is truncated");
    }
    header.data_offset = file.size();
  }
  check_layout(header, file.size(), path);
  return header;
}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile out;
  out.file_ = MappedFile::open(path);
  out.header_ = parse_gguf_header({out.file_->data(), out.file_->size()}, path);
  for (size_t i = 0; i < out.header_.tensors.size(); ++i) {
    out.index_.emplace(out.header_.tensors[i].name, i);
  }
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> GgufFile::bytes(const GgufTensorInfo& tensor) const {
  DI_CHECK(tensor.data_begin <= file_->size() && tensor.nbytes <= file_->size() - tensor.data_begin,
           path(), ": tensor \"", tensor.name, "\" is not a tensor of this file");
  return {file_->data() + tensor.data_begin, tensor.nbytes};
}

namespace {

const GgufValue* find_value(const std::map<std::string, GgufValue>& metadata,
                            const std::string& key) {
  const auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

}  // namespace

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* value = find_value(metadata(), key);
  if (value == nullptr) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(value)) return *s;
  fail(path(), ": metadata key \"", key, "\" is ", value_kind(*value), ", not a string");
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* value = find_value(metadata(), key);
  if (value == nullptr) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(value)) return *i;
  if (const auto* u = std::get_if<uint64_t>(value)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(path(), ": metadata key \"", key, "\" = ", *u, " does not fit a signed 64-bit integer");
    }
    return static_cast<int64_t>(*u);
  }
  fail(path(), ": metadata key \"", key, "\" is ", value_kind(*value), ", not an integer");
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* value = find_value(metadata(), key);
  if (value == nullptr) return std::nullopt;
  if (const auto* d = std::get_if<double>(value)) return *d;
  if (const auto* i = std::get_if<int64_t>(value)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(value)) return static_cast<double>(*u);
  fail(path(), ": metadata key \"", key, "\" is ", value_kind(*value), ", not a number");
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* value = find_value(metadata(), key);
  if (value == nullptr) return std::nullopt;
  if (const auto* b = std::get_if<bool>(value)) return *b;
  fail(path(), ": metadata key \"", key, "\" is ", value_kind(*value), ", not a bool");
}

const GgufArray* GgufFile::get_array(const std::string& key) const {
  const GgufValue* value = find_value(metadata(), key);
  if (value == nullptr) return nullptr;
  if (const auto* a = std::get_if<std::shared_ptr<const GgufArray>>(value)) return a->get();
  fail(path(), ": metadata key \"", key, "\" is ", value_kind(*value), ", not an array");
}

// Types with a DType (F32/F16/BF16 and the block types kernels::linear runs: Q8_0, Q4_0, Q4_1)
// alias the mapping (and keep it alive); the data section is aligned in the file and the
// mapping is page-aligned, so the data is aligned to general.alignment in memory.
Tensor GgufFile::to_tensor(const GgufTensorInfo& tensor) const {
  const std::span<const std::byte> data = bytes(tensor);
  const QuantTraits& traits = quant_traits(tensor.type);
  if (traits.dtype) {
    return Tensor::view(Storage::map(file_, data.data(), data.size()), 0, tensor.shape,
                        *traits.dtype);
  }
  if (traits.dequantize_row == nullptr) {
    fail(path(), ": tensor \"", tensor.name, "\" has type ", traits.name,
         ", which deepinfer cannot dequantize");
  }
  Tensor out = Tensor::zeros(tensor.shape, DType::f32);
  const int64_t row = tensor.shape.back();
  const size_t row_bytes = quant_row_bytes(tensor.type, row);
  const int64_t rows = out.numel() / row;
  float* dst = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    traits.dequantize_row(data.data() + static_cast<size_t>(r) * row_bytes, dst + r * row, row);
  }
  return out;
}

}  // namespace deepinfer::io
