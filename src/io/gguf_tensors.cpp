#include "io/gguf_tensors.h"

#include <cstring>
#include <set>

#include "core/error.h"
#include "core/log.h"

namespace deepinfer::io {

struct GgufTensors::Entry {
  // view: a stored tensor's bytes (or a contiguous part of them) under another shape, zero-copy
  // (one expert of a stack; DeepSeek's per-head attn_k_b / attn_v_b as matrices).
  enum class Kind { plain, unpermute_rows, view, kv_b };
  Kind kind = Kind::plain;
  const GgufTensorInfo* source = nullptr;
  const GgufTensorInfo* second = nullptr;  // kv_b: attn_v_b (source is attn_k_b)
  int64_t heads = 0;                       // unpermute_rows, kv_b
  int64_t index = 0;                       // view of one expert
  TensorInfo info;
};

namespace {

using Kind = GgufTensors::Entry::Kind;

// Per-layer tensors: llama.cpp's suffix -> the Hugging Face name after "model.layers.N.".
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> table = {
      {"attn_norm", "input_layernorm"},
      {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"attn_q_a", "self_attn.q_a_proj"},
      {"attn_q_a_norm", "self_attn.q_a_layernorm"},
      {"attn_q_b", "self_attn.q_b_proj"},
      {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
      {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
      {"attn_kv_b", "self_attn.kv_b_proj"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"ffn_gate_inp", "mlp.gate"},
      {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
      {"ffn_down_shexp", "mlp.shared_experts.down_proj"},
  };
  return table;
}

const std::map<std::string, std::string>& expert_names() {
  static const std::map<std::string, std::string> table = {
      {"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}};
  return table;
}

const std::map<std::string, std::string>& global_names() {
  static const std::map<std::string, std::string> table = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  return table;
}

// The dtype get() returns for a stored type: its own where it has a DType (f32, f16, bf16 and
// the block types kernels::linear runs), else f32 (dequantized at load).
DType result_dtype(GgmlType type) {
  return quant_traits(type).dtype.value_or(DType::f32);
}

// A tensor read in pieces by element (kv_b halves): block types are dequantized for it.
Tensor elementwise(Tensor t) {
  return is_block_dtype(t.dtype()) ? t.to(DType::f32) : t;
}

TensorInfo info_of(const std::string& name, const GgufTensorInfo& t, Shape shape) {
  TensorInfo info;
  info.name = name;
  info.dtype = result_dtype(t.type);
  info.shape = std::move(shape);
  info.data_begin = t.data_begin;
  info.data_end = t.data_begin + t.nbytes;
  return info;
}

// llama.cpp's converter reorders each head's rows (HF's "rotate half" pairs (i, i + d/2)
// become adjacent rows 2i, 2i+1 for its interleaved rope); this restores HF's order.
Tensor unpermute_rows(const Tensor& in, int64_t heads, const std::string& where) {
  const int64_t rows = in.dim(0);
  DI_CHECK(heads > 0 && rows % heads == 0 && (rows / heads) % 2 == 0, where, ": ", rows,
           " rows cannot be split into ", heads, " heads of an even size");
  const int64_t head_dim = rows / heads;
  const int64_t half = head_dim / 2;
  // Whole rows move, so block rows (Q8_0, Q4_x) move as their bytes.
  const size_t row_bytes = dtype_bytes(in.dtype(), in.numel() / rows);
  Tensor out = Tensor::zeros(in.shape(), in.dtype());
  const auto* src = static_cast<const std::byte*>(in.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t r = 0; r < head_dim; ++r) {
      // HF row r = a * half + b was written at 2b + a.
      const int64_t a = r / half, b = r % half;
      std::memcpy(dst + static_cast<size_t>(h * head_dim + r) * row_bytes,
                  src + static_cast<size_t>(h * head_dim + 2 * b + a) * row_bytes, row_bytes);
    }
  }
  return out;
}

// DeepSeek's kv_b_proj [heads * (nope + v), rank] from llama.cpp's k_b [heads, rank, nope]
// (transposed per head for the absorbed attention) and v_b [heads, v, rank].
Tensor merge_kv_b(Tensor k_b, Tensor v_b, const std::string& where) {
  k_b = elementwise(std::move(k_b));
  v_b = elementwise(std::move(v_b));
  if (k_b.dtype() != v_b.dtype()) {
    k_b = k_b.to(DType::f32);
    v_b = v_b.to(DType::f32);
  }
  DI_CHECK(
      k_b.ndim() == 3 && v_b.ndim() == 3 && k_b.dim(0) == v_b.dim(0) && k_b.dim(1) == v_b.dim(2),
      where, ": attn_k_b ", k_b.describe(), " and attn_v_b ", v_b.describe(),
      " do not form one kv_b_proj");
  const int64_t heads = k_b.dim(0), rank = k_b.dim(1), nope = k_b.dim(2), v = v_b.dim(1);
  const size_t es = dtype_size(k_b.dtype());
  Tensor out = Tensor::zeros({heads * (nope + v), rank}, k_b.dtype());
  const auto* k = static_cast<const std::byte*>(k_b.raw());
  const auto* vs = static_cast<const std::byte*>(v_b.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t h = 0; h < heads; ++h) {
    std::byte* head = dst + static_cast<size_t>(h * (nope + v) * rank) * es;
    for (int64_t n = 0; n < nope; ++n) {
      for (int64_t c = 0; c < rank; ++c) {
        std::memcpy(head + static_cast<size_t>(n * rank + c) * es,
                    k + static_cast<size_t>((h * rank + c) * nope + n) * es, es);
      }
    }
    std::memcpy(head + static_cast<size_t>(nope * rank) * es,
                vs + static_cast<size_t>(h * v * rank) * es, static_cast<size_t>(v * rank) * es);
  }
  return out;
}

}  // namespace

std::shared_ptr<const GgufTensors> GgufTensors::open(const std::string& path,
                                                     const MemoryOptions& memory) {
  std::shared_ptr<GgufTensors> out(new GgufTensors(GgufFile::open(path, memory)));
  const GgufFile& file = out->file_;
  const std::string arch = file.get_string("general.architecture").value_or("");
  const int64_t heads = file.get_int(arch + ".attention.head_count").value_or(0);
  const int64_t kv_heads = file.get_int(arch + ".attention.head_count_kv").value_or(heads);
  const bool permuted_qk = arch == "llama";

  std::map<std::string, int64_t> dequantized;  // type name -> tensors (no DType for it)
  std::map<std::string, int64_t> in_pieces;    // ... native block tensors read by element
  const auto add = [&](const std::string& name, std::shared_ptr<Entry> entry) {
    const bool fresh = out->entries_.emplace(name, std::move(entry)).second;
    DI_CHECK(fresh, path, ": two GGUF tensors map to '", name, "'");
  };
  const auto plain = [&](const std::string& name, const GgufTensorInfo& t) {
    auto e = std::make_shared<Entry>();
    e->source = &t;
    e->info = info_of(name, t, t.shape);
    return e;
  };

  for (const GgufTensorInfo& t : file.tensors()) {
    if (result_dtype(t.type) == DType::f32 && t.type != GgmlType::f32) {
      ++dequantized[std::string(quant_traits(t.type).name)];
    }
    if (t.name == "rope_freqs.weight") continue;  // read into config.json's rope_scaling
    if (const auto g = global_names().find(t.name); g != global_names().end()) {
      add(g->second, plain(g->second, t));
      continue;
    }
    // blk.N.<kind>.<weight|bias>
    int layer = -1;
    char rest[128] = {};
    if (std::sscanf(t.name.c_str(), "blk.%d.%127s", &layer, rest) != 2 || layer < 0) {
      add(t.name, plain(t.name, t));  // kept under its own name: reported as unused
      continue;
    }
    const std::string tail(rest);
    const size_t dot = tail.rfind('.');
    const std::string kind = tail.substr(0, dot);
    const std::string param = dot == std::string::npos ? "" : tail.substr(dot);
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    if (const auto x = expert_names().find(kind); x != expert_names().end()) {
      DI_CHECK(t.shape.size() == 3, path, ": ", t.name, " is not a 3-D expert stack");
      // The whole stack, zero-copy, as <prefix>mlp.experts.{gate,up,down}_proj [E, rows, cols]
      // (model/layers/moe/expert_stack.h reads it so), and each expert as a view of it under
      // the Hugging Face per-expert name.
      if (param == ".weight") {
        const std::string stack = prefix + "mlp.experts." + x->second;
        add(stack, plain(stack, t));
      }
      for (int64_t e = 0; e < t.shape[0]; ++e) {
        const std::string name =
            prefix + "mlp.experts." + std::to_string(e) + "." + x->second + param;
        auto entry = std::make_shared<Entry>();
        entry->kind = Kind::view;
        entry->source = &t;
        entry->index = e;
        entry->info = info_of(name, t, {t.shape[1], t.shape[2]});
        const size_t per_expert = t.nbytes / static_cast<size_t>(t.shape[0]);
        entry->info.data_begin = t.data_begin + static_cast<size_t>(e) * per_expert;
        entry->info.data_end = entry->info.data_begin + per_expert;
        add(name, entry);
      }
      continue;
    }
    if (kind == "attn_k_b" || kind == "attn_v_b") {
      if (kind == "attn_v_b") continue;  // joined with its attn_k_b
      const std::string v_name = "blk." + std::to_string(layer) + ".attn_v_b" + param;
      const GgufTensorInfo* v = file.find_tensor(v_name);
      DI_CHECK(v != nullptr, path, ": ", t.name, " has no matching ", v_name);
      const std::string name = prefix + "self_attn.kv_b_proj" + param;
      if (file.find_tensor("blk." + std::to_string(layer) + ".attn_kv_b" + param)) continue;
      auto entry = std::make_shared<Entry>();
      entry->kind = Kind::kv_b;
      entry->source = &t;
      entry->second = v;
      DI_CHECK(t.shape.size() == 3 && v->shape.size() == 3, path, ": ", t.name, " / ", v_name,
               " are not 3-D");
      entry->info = info_of(name, t, {t.shape[0] * (t.shape[2] + v->shape[1]), t.shape[1]});
      if (is_block_dtype(entry->info.dtype)) ++in_pieces[std::string(quant_traits(t.type).name)];
      if (t.type != v->type || is_block_dtype(entry->info.dtype)) entry->info.dtype = DType::f32;
      add(name, entry);
      // Block-typed halves are also offered as stored, per head as matrices (k_b: W_UK^T, rank
      // rows of nope; v_b: W_UV, v rows of rank), for the absorbed decode to run them in their
      // block type instead of the f32 widening above (which the expanded form reads).
      for (const GgufTensorInfo* half : {&t, v}) {
        if (!is_block_dtype(result_dtype(half->type))) continue;
        const std::string half_name =
            prefix + (half == &t ? "self_attn.k_b_proj" : "self_attn.v_b_proj") + param;
        auto view = std::make_shared<Entry>();
        view->kind = Kind::view;
        view->source = half;
        view->info = info_of(half_name, *half, {half->shape[0] * half->shape[1], half->shape[2]});
        add(half_name, view);
      }
      continue;
    }
    if (kind == "exp_probs_b") {
      add(prefix + "mlp.gate.e_score_correction_bias",
          plain(prefix + "mlp.gate.e_score_correction_bias", t));
      continue;
    }
    const auto l = layer_names().find(kind);
    if (l == layer_names().end()) {
      add(t.name, plain(t.name, t));
      continue;
    }
    const std::string name = prefix + l->second + param;
    auto entry = plain(name, t);
    if (permuted_qk && (kind == "attn_q" || kind == "attn_k")) {
      entry->kind = Kind::unpermute_rows;
      entry->heads = kind == "attn_q" ? heads : kv_heads;
    }
    add(name, entry);
  }
  for (const auto& [type, count] : dequantized) {
    log::info(path, ": ", count, " ", type,
              " tensors are dequantized to f32 at load (deepinfer has no native kernel for ", type,
              " yet)");
  }
  for (const auto& [type, count] : in_pieces) {
    log::info(path, ": ", count, " ", type,
              " DeepSeek attn_k_b / attn_v_b pairs are also dequantized to f32 at load (kv_b_proj "
              "of the expanded form is read by element; the absorbed decode runs them as stored)");
  }
  return out;
}

const TensorInfo& GgufTensors::info(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) fail(path(), ": has no tensor that maps to '", name, "'");
  return it->second->info;
}

Tensor GgufTensors::get(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) fail(path(), ": has no tensor that maps to '", name, "'");
  const Entry& e = *it->second;
  const std::string where = path() + ": " + e.source->name;
  switch (e.kind) {
    case Kind::plain:
      return file_.to_tensor(*e.source);
    case Kind::unpermute_rows:
      return unpermute_rows(file_.to_tensor(*e.source), e.heads, where);
    case Kind::view: {
      GgufTensorInfo slice = *e.source;
      slice.shape = e.info.shape;
      slice.data_begin = e.info.data_begin;
      slice.nbytes = e.info.data_end - e.info.data_begin;
      return file_.to_tensor(slice);
    }
    case Kind::kv_b:
      return merge_kv_b(file_.to_tensor(*e.source), file_.to_tensor(*e.second), where);
  }
  fail(where, ": unknown tensor mapping");
}

std::vector<std::string> GgufTensors::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& entry : entries_) out.push_back(entry.first);
  return out;
}

size_t GgufTensors::total_bytes() const {
  size_t total = 0;
  for (const GgufTensorInfo& t : file_.tensors()) total += t.nbytes;
  return total;
}

std::map<std::string, size_t> GgufTensors::bytes_by_type() const {
  std::map<std::string, size_t> out;
  for (const GgufTensorInfo& t : file_.tensors())
    out[std::string(quant_traits(t.type).name)] += t.nbytes;
  return out;
}

}  // namespace deepinfer::io
