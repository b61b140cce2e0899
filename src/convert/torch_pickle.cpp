#include "convert/torch_pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "convert/zip_archive.h"
#include "core/error.h"

// Opcode values and semantics: CPython Lib/pickletools.py (protocols 2 and 4, which torch.save
// writes). The interpreter builds plain values; the only "calls" are the three allowed
// globals, each interpreted here, never looked up or executed.

namespace deepinfer::convert {
namespace {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    none,
    boolean,
    integer,
    floating,
    text,
    bytes,
    tuple,
    list,
    dict,
    global,
    storage,
    tensor
  };
  Kind kind = Kind::none;
  int depth = 0;  // of nesting: bounded, so destroying a value cannot exhaust the stack
  int64_t integer = 0;
  double floating = 0;
  std::string text;             // text, bytes, global ("module.name"), storage key
  std::vector<ValuePtr> items;  // tuple, list; dict: key, value, key, value, ...
  DType dtype = DType::f32;     // storage
  Tensor tensor;
};

// A state dict nests a few levels (dict -> tensor args -> size tuples); far more is garbage.
constexpr int kMaxDepth = 64;

ValuePtr make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

struct StorageType {
  const char* name;
  std::optional<DType> dtype;
};
constexpr StorageType kStorages[] = {
    {"FloatStorage", DType::f32},     {"HalfStorage", DType::f16},
    {"BFloat16Storage", DType::bf16}, {"LongStorage", DType::i64},
    {"IntStorage", DType::i32},       {"CharStorage", DType::i8},
    {"ByteStorage", DType::u8},       {"BoolStorage", DType::boolean},
    {"DoubleStorage", std::nullopt},  {"ShortStorage", std::nullopt},
};

const char* const kCallables[] = {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
                                  "torch._utils._rebuild_parameter"};

bool allowed_global(const std::string& name) {
  for (const char* c : kCallables)
    if (name == c) return true;
  for (const StorageType& s : kStorages)
    if (name == std::string("torch.") + s.name) return true;
  return false;
}

class Unpickler {
 public:
  Unpickler(const ZipArchive& zip, std::string prefix, std::span<const std::byte> pickle)
      : zip_(zip), prefix_(std::move(prefix)), data_(pickle) {}

  ValuePtr run();

 private:
  [[noreturn]] void bad(const std::string& why) const {
    fail(zip_.path(), ": ", prefix_, "/data.pkl at byte ", pos_, ": ", why);
  }
  uint8_t byte() {
    if (pos_ >= data_.size()) bad("unexpected end of the pickle");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint64_t le(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(byte()) << (8 * i);
    return v;
  }
  std::string take(uint64_t n) {
    if (n > data_.size() - pos_) bad("string runs past the end of the pickle");
    std::string out(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return out;
  }
  std::string line() {
    std::string out;
    for (char c; (c = static_cast<char>(byte())) != '\n';) out += c;
    return out;
  }
  ValuePtr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      bad("stack underflow");
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::vector<ValuePtr> pop_mark() {
    if (marks_.empty()) bad("no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  ValuePtr& top() {
    if (stack_.empty()) bad("stack underflow");
    return stack_.back();
  }
  // Appends `items` to the container `into`, keeping its nesting depth bounded.
  void adopt(Value& into, const std::vector<ValuePtr>& items) {
    for (const auto& item : items) {
      into.depth = std::max(into.depth, item->depth + 1);
      if (into.depth > kMaxDepth) bad("values nested deeper than a state dict's");
    }
    into.items.insert(into.items.end(), items.begin(), items.end());
  }
  ValuePtr global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    if (!allowed_global(full)) {
      bad("refused global '" + full +
          "': only the globals torch.save uses for a state dict are allowed (this file may run "
          "code when loaded by torch.load; it is not read)");
    }
    auto v = make(Value::Kind::global);
    v->text = full;
    return v;
  }
  ValuePtr persistent(const ValuePtr& pid);
  ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args);
  Tensor rebuild_tensor(const std::vector<ValuePtr>& args);
  int64_t as_int(const ValuePtr& v, const char* what) const {
    if (v->kind != Value::Kind::integer) bad(std::string(what) + " must be an integer");
    return v->integer;
  }
  Shape as_ints(const ValuePtr& v, const char* what) const {
    if (v->kind != Value::Kind::tuple) bad(std::string(what) + " must be a tuple");
    Shape out;
    for (const auto& item : v->items) out.push_back(as_int(item, what));
    return out;
  }

  const ZipArchive& zip_;
  std::string prefix_;
  std::span<const std::byte> data_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, ValuePtr> memo_;
};

ValuePtr Unpickler::persistent(const ValuePtr& pid) {
  if (pid->kind != Value::Kind::tuple || pid->items.size() != 5 ||
      pid->items[0]->kind != Value::Kind::text || pid->items[0]->text != "storage" ||
      pid->items[1]->kind != Value::Kind::global || pid->items[2]->kind != Value::Kind::text) {
    bad("persistent id is not torch.save's ('storage', type, key, location, numel)");
  }
  auto storage = make(Value::Kind::storage);
  const StorageType* known = nullptr;
  for (const StorageType& s : kStorages) {
    if (pid->items[1]->text == std::string("torch.") + s.name) known = &s;
  }
  if (!known) bad("persistent id names " + pid->items[1]->text + ", not a storage type");
  if (!known->dtype)
    bad("tensors of " + pid->items[1]->text + " are not supported (f32, f16, bf16, int only)");
  storage->dtype = *known->dtype;
  storage->text = pid->items[2]->text;
  storage->integer = as_int(pid->items[4], "storage numel");
  return storage;
}

Tensor Unpickler::rebuild_tensor(const std::vector<ValuePtr>& args) {
  if (args.size() < 4 || args[0]->kind != Value::Kind::storage)
    bad("_rebuild_tensor_v2 needs (storage, offset, size, stride, ...)");
  const Value& storage = *args[0];
  const int64_t offset = as_int(args[1], "storage offset");
  const Shape shape = as_ints(args[2], "tensor size");
  const Shape stride = as_ints(args[3], "tensor stride");
  if (shape.size() != stride.size()) bad("tensor size and stride differ in length");
  const std::string entry_name = prefix_ + "/data/" + storage.text;
  const std::span<const std::byte> bytes = zip_.entry(entry_name);
  const size_t elem = dtype_size(storage.dtype);
  if (storage.integer < 0 || static_cast<uint64_t>(storage.integer) > bytes.size() ||
      bytes.size() != static_cast<size_t>(storage.integer) * elem)
    bad("storage " + entry_name + " holds " + std::to_string(bytes.size()) + " bytes, not " +
        std::to_string(storage.integer) + " elements");
  // The furthest element the view touches must lie inside the storage.
  int64_t last = offset, expected_stride = 1;
  bool contiguous = true;
  const int64_t numel = shape_numel(shape);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] < 0 || stride[d] < 0) bad("negative size or stride");
    if (shape[d] > 1 && stride[d] != expected_stride) contiguous = false;
    expected_stride *= shape[d];  // <= numel, which shape_numel checked
    int64_t reach = 0;
    if (shape[d] > 0 && (__builtin_mul_overflow(shape[d] - 1, stride[d], &reach) ||
                         __builtin_add_overflow(last, reach, &last))) {
      bad("tensor stride overflows");
    }
  }
  if (offset < 0 || offset > storage.integer || (numel > 0 && last >= storage.integer))
    bad("tensor view (offset " + std::to_string(offset) + ") runs past its storage of " +
        std::to_string(storage.integer) + " elements");
  const std::byte* base = bytes.data() + static_cast<size_t>(offset) * elem;
  if (contiguous) {
    auto borrowed = Storage::borrow(zip_.file(), base, static_cast<size_t>(numel) * elem);
    return Tensor::view(std::move(borrowed), 0, shape, storage.dtype);
  }
  Tensor out = Tensor::zeros(shape, storage.dtype);
  auto* dst = static_cast<std::byte*>(out.raw());
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < numel; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d) src += index[d] * stride[d];
    std::memcpy(dst + static_cast<size_t>(i) * elem, base + static_cast<size_t>(src) * elem, elem);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

ValuePtr Unpickler::reduce(const ValuePtr& callable, const ValuePtr& args) {
  if (callable->kind != Value::Kind::global || args->kind != Value::Kind::tuple)
    bad("REDUCE of something other than an allowed global");
  if (callable->text == "collections.OrderedDict") {
    if (!args->items.empty()) bad("OrderedDict called with arguments");
    return make(Value::Kind::dict);
  }
  auto out = make(Value::Kind::tensor);
  if (callable->text == "torch._utils._rebuild_tensor_v2") {
    out->tensor = rebuild_tensor(args->items);
  } else if (callable->text == "torch._utils._rebuild_parameter") {
    if (args->items.empty() || args->items[0]->kind != Value::Kind::tensor)
      bad("_rebuild_parameter needs a tensor");
    out->tensor = args->items[0]->tensor;
  } else {
    bad("'" + callable->text + "' cannot be called");
  }
  return out;
}

ValuePtr Unpickler::run() {
  for (;;) {
    const uint8_t op = byte();
    switch (op) {
      case 0x80:  // PROTO
        byte();
        break;
      case 0x95:  // FRAME
        le(8);
        break;
      case '(':  // MARK
        marks_.push_back(stack_.size());
        break;
      case '.':  // STOP
        if (stack_.size() != 1) bad("STOP with " + std::to_string(stack_.size()) + " values");
        return stack_.back();
      case 'c': {  // GLOBAL
        const std::string module = line();
        stack_.push_back(global(module, line()));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const ValuePtr name = pop(), module = pop();
        if (name->kind != Value::Kind::text || module->kind != Value::Kind::text)
          bad("STACK_GLOBAL of non-strings");
        stack_.push_back(global(module->text, name->text));
        break;
      }
      case 'q':  // BINPUT
        memo_[byte()] = top();
        break;
      case 'r':  // LONG_BINPUT
        memo_[le(4)] = top();
        break;
      case 0x94:  // MEMOIZE
        memo_[memo_.size()] = top();
        break;
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        const uint64_t key = op == 'h' ? byte() : le(4);
        const auto it = memo_.find(key);
        if (it == memo_.end()) bad("memo entry " + std::to_string(key) + " was never stored");
        stack_.push_back(it->second);
        break;
      }
      case 'N':
        stack_.push_back(make(Value::Kind::none));
        break;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        auto v = make(Value::Kind::boolean);
        v->integer = op == 0x88;
        stack_.push_back(v);
        break;
      }
      case 'K':
      case 'M':
      case 'J': {  // BININT1, BININT2, BININT
        auto v = make(Value::Kind::integer);
        v->integer = op == 'K'   ? static_cast<int64_t>(le(1))
                     : op == 'M' ? static_cast<int64_t>(le(2))
                                 : static_cast<int64_t>(static_cast<int32_t>(le(4)));
        stack_.push_back(v);
        break;
      }
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        const uint8_t n = byte();
        if (n > 8) bad("integer of " + std::to_string(n) + " bytes");
        uint64_t bits = n ? le(n) : 0;
        if (n > 0 && n < 8 && (bits >> (8 * n - 1)) & 1) bits |= ~uint64_t{0} << (8 * n);
        auto v = make(Value::Kind::integer);
        v->integer = static_cast<int64_t>(bits);
        stack_.push_back(v);
        break;
      }
      case 'G': {  // BINFLOAT, big-endian
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();
        auto v = make(Value::Kind::floating);
        std::memcpy(&v->floating, &bits, sizeof(bits));
        stack_.push_back(v);
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'B':
      case 'C': {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINBYTES, SHORT_BINBYTES
        const int width = op == 0x8c || op == 'C' ? 1 : op == 0x8d ? 8 : 4;
        auto v = make(op == 'B' || op == 'C' ? Value::Kind::bytes : Value::Kind::text);
        v->text = take(le(width));
        stack_.push_back(v);
        break;
      }
      case ')':
        stack_.push_back(make(Value::Kind::tuple));
        break;
      case 't':
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE, TUPLE1..3
        auto v = make(Value::Kind::tuple);
        std::vector<ValuePtr> items;
        if (op == 't') {
          items = pop_mark();
        } else {
          items.resize(op - 0x84u);
          for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        }
        adopt(*v, items);
        stack_.push_back(v);
        break;
      }
      case ']':
        stack_.push_back(make(Value::Kind::list));
        break;
      case '}':
        stack_.push_back(make(Value::Kind::dict));
        break;
      case 'a':
      case 'e': {  // APPEND, APPENDS
        std::vector<ValuePtr> items;
        if (op == 'a')
          items.push_back(pop());
        else
          items = pop_mark();
        ValuePtr& list = top();
        if (list->kind != Value::Kind::list) bad("APPEND to a non-list");
        adopt(*list, items);
        break;
      }
      case 's':
      case 'u': {  // SETITEM, SETITEMS
        std::vector<ValuePtr> items;
        if (op == 's') {
          const ValuePtr value = pop(), key = pop();
          items = {key, value};
        } else {
          items = pop_mark();
        }
        if (items.size() % 2 != 0) bad("SETITEMS with an odd number of values");
        ValuePtr& dict = top();
        if (dict->kind != Value::Kind::dict) bad("SETITEM on a non-dict");
        adopt(*dict, items);
        break;
      }
      case 'Q': {  // BINPERSID
        stack_.push_back(persistent(pop()));
        break;
      }
      case 'R': {  // REDUCE
        const ValuePtr args = pop(), callable = pop();
        stack_.push_back(reduce(callable, args));
        break;
      }
      case 'b': {  // BUILD: a state dict's attributes (its _metadata); only dicts take one
        pop();
        if (top()->kind != Value::Kind::dict) bad("BUILD on something other than a dict");
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", static_cast<unsigned>(op));
        bad(std::string("refused pickle opcode ") + hex +
            ": only the opcodes torch.save uses for a state dict are allowed");
      }
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> read_torch_state_dict(const std::string& path) {
  const ZipArchive zip = ZipArchive::open(path);
  std::string prefix;
  for (const auto& [name, bytes] : zip.entries()) {
    const auto slash = name.find('/');
    if (slash != std::string::npos && name.substr(slash) == "/data.pkl")
      prefix = name.substr(0, slash);
  }
  if (prefix.empty()) fail(path, ": no <name>/data.pkl entry; not a torch.save archive");
  if (zip.contains(prefix + "/byteorder")) {
    const auto order = zip.entry(prefix + "/byteorder");
    if (std::string(reinterpret_cast<const char*>(order.data()), order.size()) != "little")
      fail(path, ": big-endian torch.save archives are not supported");
  }
  Unpickler unpickler(zip, prefix, zip.entry(prefix + "/data.pkl"));
  const ValuePtr root = unpickler.run();
  if (root->kind != Value::Kind::dict)
    fail(path, ": holds a pickled object that is not a state dict {name: tensor}");
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i + 1 < root->items.size(); i += 2) {
    const Value& key = *root->items[i];
    const Value& value = *root->items[i + 1];
    if (key.kind != Value::Kind::text || value.kind != Value::Kind::tensor)
      fail(path, ": the state dict maps ",
           key.kind == Value::Kind::text ? key.text : "a non-string",
           " to something other than a tensor");
    out.emplace_back(key.text, value.tensor);
  }
  return out;
}

}  // namespace deepinfer::convert
