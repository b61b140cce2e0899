#pragma once
// The one op interface. Layers call these; they never contain SIMD code. Every function
// here has a scalar reference in reference.h and dispatches on active_isa() internally.
//
// Batch invariance (the engine relies on it): every output element is produced with a
// reduction order that depends only on the reduction length, never on the number of rows
// in the call, the row's position in the batch, or the thread count.
#include <cstdint>
#include <span>
#include <string_view>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/packed_weights.h"

namespace deepinfer::kernels {

// y[m, n] = x[m, k] · w[n, k]^T (+ bias[n]). w is row-major [n, k] (the Hugging Face
// Linear layout) in f32, bf16, f16 or a ggml block type (core/quant_blocks.h): q8_0, q4_0, q4_1,
// q5_0, q5_1 (each row k / 32 blocks) or the k-quants q4_k, q5_k, q6_k (each row k / 256
// super-blocks); x, y and bias are f32. bias may be null. y must not overlap x.
// bf16/f16 weights are widened exactly to f32 and multiplied in f32 (bf16 weights: unless
// MatmulPrecision::bf16 is set, below).
//
// Block weights run as llama.cpp does: each x row is quantized once per call to 8-bit blocks
// of 32 (d_x = max|x| / 127, q_x = nearbyint(x * (1 / d_x)), 0 for d_x = 0; a NaN in the
// block makes d_x NaN), then every (weight block, x block) pair is an integer dot product
// scaled in f32. The k-quants are multiplied 32 elements at a time too: a super-block is 8
// blocks of 32 (q4_k / q5_k: its sub-blocks with their 6-bit scale and min; q6_k: pairs of its
// 16-element groups), each against its own x block. (llama.cpp quantizes x for the k-quants to
// q8_K, one f32 scale per 256; one per 32 rounds x no worse and keeps one x format for all.)
// Exactly, per output (i, j), for the whole-block types q4_0, q5_0, q8_0, q4_k and q5_k (whose
// prefill GEMM puts one weight row in each vector lane, so their f32 work must be per block,
// not per lane): t = the block's exact integer dot of w_int with q_x, w_int the int8 of q8_0 or
// the quant minus 8 (q4_0) or 16 (q5_0) or the plain quant (q4_k, q5_k), and one accumulator
// per output,
//   A = fma(d_w * d_x, float(t), A)  and for q4_k / q5_k then  A = fma(m_w, d_x * float(s), A)
// in block order from +0, y = A (+ bias[j]), where d_w is the block's d (q4_k / q5_k: d * the
// sub-block's scale), m_w = -(dmin * the sub-block's min) and s the block's sum of q_x;
// llama.cpp's q4_0 x q8_0 arithmetic. For the others: split each block into 8 lanes of 4
// consecutive elements; t[l] = sum of w_int * q_x over lane l (exact in int32), with w_int the
// quant minus 32 (q6_k) or the plain quant (q4_1, q5_1);
// d_w[l] is the lane's weight scale: the block's d, or for q6_k d * scale of the lane's
// 16-element group (an f16 times a small integer: exact in f32); m_w[l] is q4_1's / q5_1's m.
// Block b adds into accumulator A[8 (b % 2) + l] (16 f32, from +0), in block order,
//   A = fma(d_w[l] * d_x, float(t[l]), A)  and for types with a min then
//   A = fma(m_w[l], d_x * float(s[l]), A)
// where s[l] is the lane sum of q_x; then with h[l] = A[l] + A[l + 8],
// y = ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)) (+ bias[j]), the horizontal-sum
// tree of every ISA.
// Every ISA path computes exactly this (reference::linear spells it out),
// so results are bitwise the same on scalar, AVX2, AVX-512 and AVX-512 VNNI, and batch
// invariant. k must be a multiple of the type's block size (32, or 256 for the k-quants).
void linear(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t n,
            const float* bias, float* y, ThreadPool& pool);

// Several block-weight products of one k and weight type in one call, each job y[m, n] = x[m,
// k] · W^T with its own x, weights, y and (optionally) n, no bias: the routed experts of an MoE
// layer, or q / k / v and gate / up of one input. Bitwise each job's linear(); one thread split
// and one wake-up for the whole group, a thread's share streams the jobs' weights back to back
// (decode is a handful of small matrices per layer), and a job whose x and m are those of the
// job before it reuses that job's quantized x.
struct LinearJob {
  const float* x = nullptr;  // [m, k]
  int64_t m = 0;
  const void* w = nullptr;  // [n, k] of the call's w_dtype
  float* y = nullptr;       // [m, n]
  int64_t n = 0;            // 0: the call's n
};
// w_repacked: every job's w is its rows repacked (pack_weights() of the whole stack,
// a job's matrix being whole units of it, repacked_row_unit(): see packed_weights.h), under
// AVX2 / AVX-512.
void linear_grouped(std::span<const LinearJob> jobs, int64_t k, DType w_dtype, int64_t n,
                    ThreadPool& pool, bool w_repacked = false);

// The block types whose linear() takes whole-block integer dots (above).
constexpr bool is_whole_block_dtype(DType w_dtype) {
  return w_dtype == DType::q4_0 || w_dtype == DType::q5_0 || w_dtype == DType::q8_0 ||
         w_dtype == DType::q4_k || w_dtype == DType::q5_k;
}

// The same product with f32 / bf16 weights packed at load (pack_weights(), packed_weights.h;
// layout in gemm_packed.h): register tiles of up to 14 rows x 32 outputs (AVX2: 6 x 16), k in
// L1-sized chunks.
// Each output is one chain over k in order, acc = fma(x[p], w[j, p], acc) from 0, then
// + bias[j] (bf16 weights widened exactly; under MatmulPrecision::bf16 with AVX512_BF16, x is
// rounded to bf16 and acc = vdpbf16ps(acc, x pair, w pair) over the pairs (2q, 2q + 1) in
// order). Results are bitwise independent of m, of a row's place and of the thread count, and
// differ from linear() on the unpacked matrix by rounding only: a layer sends a matrix always
// the same way. Exact paths are bitwise the same on AVX2 and AVX-512 (bf16 activations: AVX2
// and CPUs without AVX512_BF16 run the rounded x through the exact chain); under the scalar ISA
// this is linear() on w.source().
void linear(const float* x, int64_t m, const PackedWeights& w, const float* bias, float* y,
            ThreadPool& pool);

// y[m, n] = x[m, k] · W^T (+ bias[n]) for an FP8 E4M3 weight kept as stored, with block scales
// (DeepSeek-V3's layout, io/fp8.h): W[j, c] = f32(q[j, c]) * scale[j / block_rows, c /
// block_cols], scale row-major [ceil(n / block_rows), ceil(k / block_cols)] f32. Each weight is
// widened and scaled in register (one f32 rounding: the value the dequantize-at-load path
// stores), then FMA'd with the f32 x; the exact order (16 lane accumulators in k order, one
// horizontal-sum tree) is in linear_fp8.h, the same on every ISA, so results are bitwise equal
// on scalar, AVX2 and AVX-512 and batch invariant. block_cols must be a multiple of 16.
struct Fp8Weight {
  const uint8_t* q = nullptr;    // [n, k]
  const float* scale = nullptr;  // [ceil(n / block_rows), ceil(k / block_cols)]
  int64_t block_rows = 128;
  int64_t block_cols = 128;
};
void linear_fp8(const float* x, int64_t m, int64_t k, const Fp8Weight& w, int64_t n,
                const float* bias, float* y, ThreadPool& pool);

// W8A8 (--quantization w8a8; SGLang's / vLLM's "w8a8_int8"): y[m, n] = x[m, k] · W^T (+ bias)
// for int8 weights w[n, k] with one f32 scale per output row (W[j, c] = w[j, c] * w_scale[j]).
// Each x row is quantized per call, symmetric per token (quantize_w8a8_row); the dot products
// are exact int32 sums, y = fma(float(t), w_scale[j] * x_scale[i], bias[j]); every ISA
// (scalar, AVX2, AVX-512BW, AVX-512 VNNI) is bitwise equal and batch invariant (the exact
// arithmetic: linear_w8a8.h). k < 65536.
void linear_w8a8(const float* x, int64_t m, int64_t k, const int8_t* w, const float* w_scale,
                 int64_t n, const float* bias, float* y, ThreadPool& pool);
// Symmetric int8 of one row: scale = max|x| / 127, q = nearbyint(x * (127 / max|x|)) clamped to
// [-127, 127] (all 0 and scale 0 for a zero row). The activations' and the weights' quantizer.
void quantize_w8a8_row(const float* x, int64_t k, int8_t* q, float* scale);

// The code path linear() takes for block weights under the active ISA, for start-up logs:
// "AMX-INT8 tiles from 16 rows and AVX-512 VNNI", "AVX-512 VNNI", "AVX-512", "AVX2" or
// "scalar".
std::string_view block_linear_path();
// How bf16 weights meet bf16 activations (MatmulPrecision::bf16) under the active ISA, for
// start-up logs: "AMX-BF16 tiles", "AVX-512 BF16 (vdpbf16ps)" or "rounded x, f32 FMA".
std::string_view bf16_activation_path();

// How linear() multiplies by bf16 weights (f32 and f16 weights are always exact f32).
//  - f32 (default): bf16 weights are widened exactly, products and sums in f32.
//  - bf16: each x row is first rounded to bf16 (nearest even), as llama.cpp and
//    torch.matmul on bf16 tensors do. With AVX512_BF16 the products then go through vdpbf16ps
//    (pairs of products added into f32, denormals flushed), about twice the throughput of the
//    f32 path at large m; on other CPUs / ISAs the rounded x goes through the f32 path. So
//    results differ slightly between those machines, but on one machine a row's result is
//    still bitwise independent of m, of its place in the batch and of the thread count.
// A process-wide setting (read at each call): set it once at start-up, before any inference.
// Until set, it is DEEPINFER_MATMUL_PRECISION (f32 | bf16, read once) or f32.
enum class MatmulPrecision { f32, bf16 };
void set_matmul_precision(MatmulPrecision precision);
MatmulPrecision matmul_precision();
std::string_view matmul_precision_name(MatmulPrecision precision);
// "f32" or "bf16"; throws Error naming the value otherwise (for --matmul-precision).
MatmulPrecision parse_matmul_precision(std::string_view name);

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight. y may alias x.
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y);

// torch.nn.LayerNorm of each row: (x - mean) / sqrt(biased variance + eps) * weight + bias;
// y may alias x. (The DSA indexer's k_norm: one row per token, not worth an ISA kernel.)
void layer_norm(const float* x, const float* weight, const float* bias, int64_t rows, int64_t dim,
                float eps, float* y);

enum class RopeLayout {
  half_split,   // pairs (i, i + rotary_dim/2): Qwen, Llama ("rotate_half")
  interleaved,  // pairs (2i, 2i + 1): GLM, DeepSeek MLA
};
// Rotates, in place, the first rotary_dim features of every head of x[tokens, heads, head_dim].
// cos/sin are [tokens, rotary_dim / 2]: the angle of pair i for each token.
void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos, const float* sin, RopeLayout layout);

// In-place softmax of each row of x[rows, cols].
void softmax(float* x, int64_t rows, int64_t cols);

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// out[i] = a[i] + b[i]; out may alias a or b.
void add(const float* a, const float* b, float* out, int64_t n);

// The residual step of a pre-norm decoder in one pass over the rows: residual += x, then
// y = rms_norm(residual, weight). Bit for bit add() followed by rms_norm() on every ISA (the
// sum of squares is accumulated in rms_norm's order as each sum is stored). y must not alias
// residual or x.
void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* y);

// K/V storage of one layer for one sequence, read through its block table.
// Token at logical position p lives in block block_table[p / block_size], slot p % block_size.
// Elements are `dtype`: f32, bf16, f16, or i8 with one f32 scale per quant_group consecutive
// elements of each (slot, kv head) row (value = scale * int8). Attention over an i8 cache with
// separate V rows scores on integers, as llama.cpp does over a q8_0 K cache: the query is
// quantized as the rows and each group's dot product is an exact integer (attend_i8.h); V, and
// K where V rows lead the K rows (MLA), are read as scale * int8.
struct PagedKv {
  const void* k = nullptr;  // [num_blocks, block_size, kv_heads, head_dim] (see head_rows)
  const void* v = nullptr;  // [num_blocks, block_size, kv_heads, v_head_dim]
  int64_t block_size = 16;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
  std::span<const int32_t> block_table;
  // Elements from one V row (slot, kv head) to the next; 0 means v_head_dim (dense rows). Lets
  // V be a prefix of each K row (MLA absorbed decode: v = k, v_head_dim = kv_lora_rank,
  // v_row_stride = head_dim).
  int64_t v_row_stride = 0;
  DType dtype = DType::f32;
  // i8 only: scales [num_blocks, block_size, kv_heads, head_dim / quant_group] for K and
  // [.., v_row_stride / quant_group] for V; quant_group divides head_dim, v_head_dim and
  // v_row_stride.
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int64_t quant_group = 0;
  // Row layout (kv_cache_row): 0, the slot's kv heads side by side as above; > 0, head-major,
  // each kv head's rows (and i8 scales) in a run of head_rows slot rows, [kv_heads, head_rows,
  // ...] (KvCache: head_rows = num_blocks * block_size).
  int64_t head_rows = 0;
};

// The cache row of (slot = block * block_size + offset, kv head), in K / V row units: slot-major
// (head_rows 0) or head-major. Head-major keeps one kv head's keys contiguous, so a decode
// thread streaming one kv head reads whole lines and pages in order: with the heads of a slot
// side by side it read every other 128 B, which the hardware prefetchers did not follow
// (docs/PERFORMANCE.md, "KV cache rows by kv head"). Static: the ISA files inline their own
// copy (backend.h).
static inline int64_t kv_cache_row(int64_t slot, int64_t kv_head, int64_t kv_heads,
                                   int64_t head_rows) {
  return head_rows > 0 ? kv_head * head_rows + slot : slot * kv_heads + kv_head;
}

// Causal attention of q[tokens, heads, head_dim] over a paged cache (GQA: query head h
// reads kv head h / (heads / kv_heads)). Query t sits at positions[t] and attends to cache
// positions [0, positions[t]]; its own K/V must already be in the cache. Flash-style online
// softmax over keys in position order (no tokens x tokens matrix); out is
// [tokens, heads, v_head_dim]. The result for a query does not depend on the other queries.
void paged_attention(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                     const PagedKv& kv, float scale, float* out, ThreadPool& pool);

// paged_attention in the span kernel's 256-key spans whatever the group: on AVX-512, tiles of
// several tokens' heads share every K/V load, and decode is split-K over the spans. (For groups
// under 16 query heads per kv head paged_attention itself decodes with the per-token kernel and
// prefills in query tiles over the whole context, with that kernel's arithmetic.) For
// many-token calls of a caller whose choice depends only on its own sequence (MLA's expanded
// prefill, already not decode's arithmetic); other ISAs run paged_attention.
void paged_attention_query_tiles(const float* q, int64_t tokens, const int32_t* positions,
                                 int64_t heads, const PagedKv& kv, float scale, float* out,
                                 ThreadPool& pool);

// The same attention in three separate passes per query head (enable_atb_attention = false,
// for A/B runs): all scores q.k * scale of keys [0, pos] into a buffer, kernels::softmax over
// it, then the probability-weighted sum of the V rows. Same inputs and output as
// paged_attention; the result differs from it only by float reassociation (the fused kernel
// rescales a running sum per key chunk): within 1e-5 relative to max |V| in the tests.
void paged_attention_unfused(const float* q, int64_t tokens, const int32_t* positions,
                             int64_t heads, const PagedKv& kv, float scale, float* out,
                             ThreadPool& pool);

// paged_attention or paged_attention_unfused, as a layer picks one at load.
using PagedAttentionFn = void (*)(const float*, int64_t, const int32_t*, int64_t, const PagedKv&,
                                  float, float*, ThreadPool&);
inline PagedAttentionFn paged_attention_kernel(bool fused) {
  return fused ? &paged_attention : &paged_attention_unfused;
}

}  // namespace deepinfer::kernels
