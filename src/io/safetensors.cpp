#include "io/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/printable.h"
#include "core/quant_blocks.h"

// Validation follows the reference implementation (huggingface/safetensors, tensor.rs
// `read_metadata` / `Metadata::validate`): header length <= 100,000,000 and within the file,
// header is a JSON object, every entry has a known dtype, a shape and data_offsets whose
// size equals numel x element size with checked arithmetic, and the last tensor ends exactly
// at the end of the file (trailing bytes are rejected). Two deliberate differences: the
// reference requires tensors to tile the data section with no gaps; we tolerate gaps (no
// writer we know produces them, but they are harmless) and only reject overlaps. And the
// reference keeps the last of duplicate JSON keys; we reject duplicates anywhere in the header.

namespace deepinfer::io {
namespace {

constexpr size_t kMaxHeaderBytes = 100'000'000;  // the reference's MAX_HEADER_SIZE

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"F32", DType::f32},
    {"F16", DType::f16},
    {"BF16", DType::bf16},
    {"F8_E4M3", DType::f8_e4m3},
    {"I8", DType::i8},
    {"U8", DType::u8},
    {"I32", DType::i32},
    {"I64", DType::i64},
    {"BOOL", DType::boolean},
    // Our own names for ggml's block types (deepinfer convert writes them; docs/CONVERT.md):
    // the shape is the logical [rows, cols] in elements, each row whole blocks of the type.
    {"Q8_0", DType::q8_0},
    {"Q4_0", DType::q4_0},
    {"Q4_1", DType::q4_1},
    {"Q5_0", DType::q5_0},
    {"Q5_1", DType::q5_1},
    {"Q4_K", DType::q4_k},
    {"Q5_K", DType::q5_k},
    {"Q6_K", DType::q6_k},
};

using json = nlohmann::json;

// nlohmann keeps the last of duplicate keys silently; a parser callback sees every key
// as it is read, so we can reject the file instead of loading the wrong tensor.
// nlohmann's DOM builder counting the keys it reads. A repeated key in an object leaves that
// object with fewer members than keys read, so comparing the two finds duplicates in linear
// time. (nlohmann's callback parser could check each object, but after each closed object it
// scans the parent for a discarded value: quadratic in the number of tensors.)
class KeyCountingBuilder : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  explicit KeyCountingBuilder(json& root) : json_sax_dom_parser(root, /*allow_exceptions=*/true) {}
  bool key(json::string_t& key) {
    ++keys;
    return json_sax_dom_parser::key(key);
  }
  size_t keys = 0;
};

size_t members(const json& value) {
  size_t n = value.is_object() ? value.size() : 0;
  if (value.is_structured()) {
    for (const auto& item : value) n += members(item);
  }
  return n;
}

// The first repeated key in the header text (depth first), for the error message: the slow
// check, run only once a duplicate is known to be there.
std::string repeated_key(std::string_view text) {
  std::string found;
  std::vector<std::unordered_set<std::string>> open;
  const auto callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    if (event == json::parse_event_t::object_end) open.pop_back();
    if (event == json::parse_event_t::key && found.empty() &&
        !open.back().insert(parsed.get<std::string>()).second) {
      found = parsed.get<std::string>();
    }
    return true;
  };
  const json ignored = json::parse(text.begin(), text.end(), callback);
  return found;
}

json parse_header_json(std::string_view text, const std::string& path) {
  json root;
  KeyCountingBuilder builder(root);
  try {
    json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::exception& e) {
    fail(path, ": header is not valid JSON: ", printable(e.what()));
  }
  if (members(root) != builder.keys) {
    fail(path, ": duplicate key \"", repeated_key(text), "\" in the header");
  }
  return root;
}

const json& field(const json& entry, const char* key, const std::string& where) {
  const auto it = entry.find(key);
  if (it == entry.end()) fail(where, ": missing \"", key, "\"");
  return *it;
}

// A non-negative JSON integer (nlohmann stores those as number_unsigned).
uint64_t as_unsigned(const json& value, const std::string& where, const char* what) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) fail(where, ": negative ", what, " ", value.get<int64_t>());
  fail(where, ": ", what, " must be a non-negative integer, got ", value.type_name(), " ",
       value.dump());
}

// Bytes the tensor's data must hold: numel x element size, or for a block type rows x row bytes
// (its last dimension whole blocks), with checked arithmetic.
uint64_t stored_bytes(const TensorInfo& info, const json& shape, const std::string& where) {
  uint64_t bytes = 1;
  size_t leading = info.shape.size();
  if (const QuantTraits* traits = block_traits(info.dtype)) {
    if (info.shape.empty()) fail(where, ": a ", dtype_name(info.dtype), " tensor needs a shape");
    const int64_t cols = info.shape.back();
    if (cols % traits->block_size != 0) {
      fail(where, ": shape ", shape.dump(), " is not whole ", traits->block_size, "-element ",
           traits->name, " blocks along its last dimension");
    }
    bytes = static_cast<uint64_t>(cols / traits->block_size) * traits->block_bytes;
    --leading;
  } else {
    bytes = dtype_size(info.dtype);
  }
  for (size_t i = 0; i < leading; ++i) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(info.shape[i]), &bytes)) {
      fail(where, ": shape ", shape.dump(), " of ", dtype_name(info.dtype),
           " overflows a 64-bit byte count");
    }
  }
  return bytes;
}

TensorInfo parse_entry(const std::string& name, const json& entry, size_t data_offset,
                       size_t data_size, const std::string& path) {
  const std::string where = str_cat(path, ": tensor \"", name, "\"");
  if (!entry.is_object()) fail(where, ": entry must be an object, got ", entry.type_name());
  TensorInfo info;
  info.name = name;

  const json& dtype = field(entry, "dtype", where);
  if (!dtype.is_string()) fail(where, ": \"dtype\" must be a string, got ", dtype.type_name());
  const auto& dtype_name = dtype.get_ref<const std::string&>();
  const auto known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames),
                                  [&](const DTypeName& d) { return d.name == dtype_name; });
  if (known == std::end(kDTypeNames)) {
    fail(where, ": unsupported dtype ", dtype_name,
         " (supported: F32, F16, BF16, F8_E4M3, I8, U8, I32, I64, BOOL and the block types Q8_0, "
         "Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  }
  info.dtype = known->dtype;

  const json& shape = field(entry, "shape", where);
  if (!shape.is_array()) fail(where, ": \"shape\" must be an array, got ", shape.type_name());
  for (const json& d : shape) {
    const uint64_t dim = as_unsigned(d, where, "dimension");
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(where, ": dimension ", dim, " of shape ", shape.dump(), " overflows int64");
    }
    info.shape.push_back(static_cast<int64_t>(dim));
  }
  const uint64_t bytes = stored_bytes(info, shape, where);

  const json& offsets = field(entry, "data_offsets", where);
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(where, ": \"data_offsets\" must be an array [begin, end], got ", offsets.dump());
  }
  const uint64_t begin = as_unsigned(offsets[0], where, "data_offsets begin");
  const uint64_t end = as_unsigned(offsets[1], where, "data_offsets end");
  if (end < begin) fail(where, ": data_offsets end ", end, " < begin ", begin);
  if (end - begin != bytes) {
    fail(where, ": data_offsets [", begin, ", ", end, "] hold ", end - begin, " bytes but ",
         dtype_name, shape.dump(), " needs ", bytes);
  }
  if (end > data_size) {
    fail(where, ": data_offsets end ", end, " is beyond the data section (", data_size,
         " bytes); the file is truncated or the header is wrong");
  }
  info.data_begin = data_offset + begin;
  info.data_end = data_offset + end;
  return info;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& path) {
  if (!value.is_object()) {
    fail(path, ": \"__metadata__\" must be an object of strings, got ", value.type_name());
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      fail(path, ": \"__metadata__\" value of \"", key, "\" must be a string, got ", v.type_name());
    }
    out.emplace(key, v.get<std::string>());
  }
  return out;
}

// Tensors may come in any order in the header; sorted by offset no two may share bytes
// (zero-sized tensors own none), and the data section must end where the last tensor does.
void check_layout(std::vector<const TensorInfo*> sorted, const SafetensorsHeader& header,
                  size_t file_size, const std::string& path) {
  std::sort(sorted.begin(), sorted.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::tie(a->data_begin, a->data_end) < std::tie(b->data_begin, b->data_end);
  });
  const size_t o = header.data_offset;
  size_t covered = o;  // end of the last non-empty tensor
  size_t last_end = o;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* t : sorted) {
    last_end = std::max(last_end, t->data_end);
    if (t->data_begin == t->data_end) continue;
    if (t->data_begin < covered) {
      fail(path, ": tensors \"", previous->name, "\" [", previous->data_begin - o, ", ",
           previous->data_end - o, ") and \"", t->name, "\" [", t->data_begin - o, ", ",
           t->data_end - o, ") overlap");
    }
    covered = t->data_end;
    previous = t;
  }
  if (last_end != file_size) {
    fail(path, ": ", file_size - last_end,
         " trailing bytes after the last tensor (the data section is ", file_size - o,
         " bytes, tensors end at ", last_end - o,
         "); safetensors requires the data to end at the last tensor");
  }
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.dtype == dtype) return d.name;
  }
  fail("dtype ", dtype_name(dtype), " has no safetensors name");
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file,
                                           const std::string& path) {
  if (file.size() < 8) {
    fail(path, ": file is ", file.size(),
         " bytes, too short for a safetensors file (it starts with an 8-byte header length)");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) {
    header_len = (header_len << 8) | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
  }
  if (header_len > kMaxHeaderBytes) {
    fail(path, ": header length ", header_len, " exceeds the ", kMaxHeaderBytes,
         "-byte limit; this is not a safetensors file or it is corrupted");
  }
  if (header_len > file.size() - 8) {
    fail(path, ": header length ", header_len, " exceeds the ", file.size() - 8,
         " bytes after the length prefix; the file is truncated or not safetensors");
  }
  SafetensorsHeader header;
  header.data_offset = 8 + static_cast<size_t>(header_len);
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, header_len);
  const json root = parse_header_json(text, path);
  if (!root.is_object()) fail(path, ": header must be a JSON object, got ", root.type_name());

  const size_t data_size = file.size() - header.data_offset;
  header.tensors.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      header.metadata = parse_metadata(entry, path);
    } else {
      header.tensors.push_back(parse_entry(name, entry, header.data_offset, data_size, path));
    }
  }
  std::vector<const TensorInfo*> sorted;
  sorted.reserve(header.tensors.size());
  for (const TensorInfo& t : header.tensors) sorted.push_back(&t);
  check_layout(std::move(sorted), header, file.size(), path);
  return header;
}

SafetensorsFile SafetensorsFile::open(const std::string& path, const MemoryOptions& memory) {
  SafetensorsFile out;
  out.file_ = MappedFile::open(path, memory);
  SafetensorsHeader header = parse_safetensors_header({out.file_->data(), out.file_->size()}, path);
  out.tensors_ = std::move(header.tensors);
  out.metadata_ = std::move(header.metadata);
  for (size_t i = 0; i < out.tensors_.size(); ++i) out.index_.emplace(out.tensors_[i].name, i);
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const {
  return index_.count(name) != 0;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail(path(), ": no tensor named \"", name, "\"");
  return tensors_[it->second];
}

// The tensor aliases the read-only mapping and keeps it alive. Its data may be unaligned for
// the dtype (safetensors only orders tensors by alignment, the header length is arbitrary in
// files from other writers); our kernels read weights with unaligned loads, so that is fine.
Tensor SafetensorsFile::get(const std::string& name) const {
  const TensorInfo& t = info(name);
  auto storage = Storage::map(file_, file_->data() + t.data_begin, t.data_end - t.data_begin);
  return Tensor::view(std::move(storage), 0, t.shape, t.dtype);
}

}  // namespace deepinfer::io
