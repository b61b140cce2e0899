#pragma once
// Internal to src/kernels: the per-ISA primitives that kernels.cpp dispatches to. Each of
// detail::scalar, detail::avx2 and detail::avx512 implements every function declared in
// DEEPINFER_KERNELS_BACKEND below (files *_scalar.cpp, *_avx2.cpp, *_avx512.cpp).
//
// The ISA files take plain pointers and PODs and use no std:: templates or inline library
// functions: such code is emitted as weak (COMDAT) symbols, and the linker may keep the copy
// compiled with -mavx512f for the whole program, which would then fault on older CPUs.
// Argument checks, allocation and threading therefore live in kernels.cpp.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

// Fully unrolls a loop over a register tile (compile-time trip count) so that its vector
// accumulators live in registers; GCC does not always do it on its own for AVX2 code.
#define DEEPINFER_UNROLL _Pragma("GCC unroll 16")
// For the helpers of a register tile (a block's transposition, its dot products): inlined into
// the streaming loop, their vectors stay in registers instead of going through the stack, which
// GCC's own heuristics do not always see (measured: the decode loops called them out of line).
#define DEEPINFER_INLINE __attribute__((always_inline)) inline

namespace deepinfer::kernels::detail {

// One linear call as a backend sees it. x is either the caller's [m, k] activations
// (x_stride = k) or the backend's packed copy of them (see linear_pack_stride).
struct LinearArgs {
  const float* x = nullptr;
  int64_t x_stride = 0;
  int64_t k = 0;
  const void* w = nullptr;  // [n, k]
  DType w_dtype = DType::f32;
  int64_t n = 0;
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;           // [m, n]
  // MatmulPrecision::bf16 on AVX512_BF16 only: x rounded to bf16, rows of x_stride elements
  // (k rounded up to whole vectors, zero-padded); x is then unused.
  const uint16_t* xb = nullptr;
  // Block weights (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k): x quantized once per call
  // by quantize_x_blocks(); x is then unused. Row i: xq + i * k, xd + i * k / 4, xt + i * k / 4.
  const int8_t* xq = nullptr;
  const float* xd = nullptr;
  const int32_t* xt = nullptr;
  // Whole-block types (kernels.h), optional: each block's d and t once, row i at i * k / 32 (the
  // 8 equal entries of a block in xd / xt, compacted). A decode of long rows streams more weight
  // bytes through L1 between two uses of a block's terms than it holds: at one 4-byte entry per
  // block instead of two 32-byte strides, the x side misses far less (q8_0 at k = 4864 streamed
  // ~25 % faster).
  const float* xbd = nullptr;
  const int32_t* xbt = nullptr;
  // w is repacked (q4_0, q5_0, q8_0, q4_k under AVX2 / AVX-512: pack_weights; wb::repack_rows).
  bool w_repacked = false;
  // AMX tiles (linear_rows_q8_amx), whole-block types: the block terms of xbd / xbt again, in
  // tile order [tiles][blocks][16]: tile T holds x rows 16 T .. 16 T + 15 of this call (rows
  // past its m repeat its last row), so one tile's terms of one block are one 64-byte line.
  // And xq itself in tile order, [tiles][blocks][16 rows][32], a tile's block one 512-byte run.
  // Null: no tiles (fewer than kAmxMinRows rows).
  const float* xtd = nullptr;
  const int32_t* xtt = nullptr;
  const int8_t* xtq = nullptr;
};

// Where the whole-block kernels read block b of x row i's d and t: at (i * blocks + b) * stride
// of d and t, from xbd / xbt where the caller compacted them, else from xd / xt.
struct BlockTerms {
  const float* d;
  const int32_t* t;
  int64_t stride;
};
inline BlockTerms block_terms(const LinearArgs& a) {
  return a.xbd != nullptr ? BlockTerms{a.xbd, a.xbt, 1} : BlockTerms{a.xd, a.xt, 8};
}

// kernels::linear, on w as stored or, with w_repacked, on repacked blocks (the packed
// overload's path for such weights, gemm_packed.cpp; LinearArgs::w_repacked).
void linear_with_layout(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype,
                        bool w_repacked, int64_t n, const float* bias, float* y, ThreadPool& pool);

// Elements per x block, and per weight block of the 32-element types (q8_0, q4_0, q4_1, q5_0,
// q5_1); a k-quant super-block of 256 is 8 such blocks (its 32-element sub-blocks, or pairs of
// q6_k's 16-element groups), each multiplied by one x block.
inline constexpr int64_t kQuantBlock = 32;
inline constexpr int64_t kQuantSuperBlock = 256;

// x[m, k] (k a multiple of 32) to 8-bit blocks, the arithmetic of kernels.h (block weights):
// per block of 32, d = max|x| / 127 and q = nearbyint(x * (1 / d)) (0 when d is 0). Laid out
// for the kernels, 8 values per block so that a block is one 256-bit load and two blocks one
// 512-bit load: q[m, k]; d[m, k / 4] (each block's d 8 times); t[m, k / 4], the term of
// w_dtype: for the per-lane types from the lane sums s[l] = q[4l] + ... + q[4l + 3], the
// integer -32 s[l] (q6_k, whose quants the kernels take unsigned) or the f32 bits of
// d * float(s[l]) (q4_1, q5_1: types with a min); for the whole-block types (kernels.h) all 8
// entries of a block hold the same term from the block's sum s: -8 s (q4_0), -16 s (q5_0),
// -128 s (q8_0, for VNNI's w + 128; the other paths take q8_0 signed and ignore it), or the
// f32 bits of d * float(s) (q4_k, q5_k). quantize_x.cpp states it in baseline code; the AVX2
// and AVX-512 quantizers store the same bytes (tested), so every ISA's kernels see the same
// integers and products.
void quantize_x_blocks(const float* x, int64_t m, int64_t k, DType w_dtype, int8_t* q, float* d,
                       int32_t* t);
// The SIMD quantizers take w_dtype's terms as baseline code computed them (qx::terms_of).
namespace qx {
struct Terms;
}
namespace avx2 {
void quantize_x_blocks(const float* x, int64_t m, int64_t k, const qx::Terms& terms, int8_t* q,
                       float* d, int32_t* t);
}
namespace avx512 {
void quantize_x_blocks(const float* x, int64_t m, int64_t k, const qx::Terms& terms, int8_t* q,
                       float* d, int32_t* t);
}

// The K/V cache of one layer as attend() reads it (PagedKv without std::span). Strides are in
// elements; an i8 row's scales are at row * (stride / group).
struct AttendArgs {
  const void* k = nullptr;
  const void* v = nullptr;
  const int32_t* block_table = nullptr;
  int64_t block_size = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t v_row_stride = 0;  // resolved: never 0 here
  float scale = 1.0f;
  DType dtype = DType::f32;
  const float* k_scale = nullptr;  // i8 only
  const float* v_scale = nullptr;
  int64_t group = 0;      // i8 only: elements per scale
  int64_t head_rows = 0;  // PagedKv::head_rows (kv_cache_row)
};

// Keys are consumed in chunks of positions [c * kAttendChunk, (c + 1) * kAttendChunk): the
// chunking depends only on key positions, so a query's result does not depend on the batch.
inline constexpr int64_t kAttendChunk = 16;

#define DEEPINFER_KERNELS_BACKEND                                                                 \
  /* Weight rows per work item when splitting n across threads (a multiple of the tile). */       \
  int64_t linear_tile_n();                                                                        \
  /* Floats per row of the packed x this backend wants for w_dtype, or 0 to read x as is. */      \
  int64_t linear_pack_stride(int64_t k, DType w_dtype);                                           \
  void linear_pack_x(const float* x, int64_t m, int64_t k, DType w_dtype, float* packed);         \
  /* Per-thread scratch floats linear_rows() needs. */                                            \
  int64_t linear_scratch_floats(int64_t k, DType w_dtype);                                        \
  /* y[m0:m1, n0:n1] of the linear; single-threaded. */                                           \
  void linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1,           \
                   float* scratch);                                                               \
  void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,        \
                float* y);                                                                        \
  void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,        \
            const float* cos, const float* sin, RopeLayout layout);                               \
  void softmax(float* x, int64_t rows, int64_t cols);                                             \
  void silu_mul(const float* gate, const float* up, float* out, int64_t n);                       \
  void add(const float* a, const float* b, float* out, int64_t n);                                \
  /* residual += x, then y = rms_norm(residual): the sum of squares is taken as each sum is  */   \
  /* stored, in rms_norm's order, so the result equals add() then rms_norm() bit for bit.   */    \
  void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows,           \
                    int64_t dim, float eps, float* y);                                            \
  /* Scratch floats attend() needs for q_heads query heads. */                                    \
  int64_t attend_scratch_floats(const AttendArgs& a, int64_t q_heads);                            \
  /* q_heads consecutive query heads q[q_heads, head_dim] of one token at position pos, all */    \
  /* reading kv_head, over keys [0, pos]; out[q_heads, v_head_dim]. Each head's result is   */    \
  /* bitwise the same whatever q_heads is (the heads only share K/V loads).                  */   \
  void attend(const AttendArgs& a, const float* q, int64_t q_heads, int64_t pos, int64_t kv_head, \
              float* out, float* scratch);

namespace scalar {
DEEPINFER_KERNELS_BACKEND
}
namespace avx2 {
DEEPINFER_KERNELS_BACKEND
}
namespace avx512 {
DEEPINFER_KERNELS_BACKEND
}

#undef DEEPINFER_KERNELS_BACKEND

// attend() for several tokens of one sequence at once (a prefill tile): token t's q_heads heads
// at q + t * q_stride, position pos[t], its output at out + t * out_stride. Each chunk of keys
// is read (and widened) once for all the tokens; each head's result is bitwise what attend()
// gives the token alone.
namespace avx2 {
int64_t attend_tokens_scratch_floats(const AttendArgs& a, int64_t tokens, int64_t q_heads);
void attend_tokens(const AttendArgs& a, const float* q, int64_t q_stride, int64_t tokens,
                   int64_t q_heads, const int64_t* pos, int64_t kv_head, float* out,
                   int64_t out_stride, float* scratch);
}  // namespace avx2

// The bf16-activation linear (MatmulPrecision::bf16, bf16 weights): vdpbf16ps over pairs of
// bf16 x and weights. Needs AVX512_BF16 (cpu_has_avx512_bf16()); linear_avx512_bf16.cpp.
namespace avx512 {
// bf16 elements per row of the packed x: k rounded up to a whole number of 32-element vectors.
int64_t linear_bf16_x_stride(int64_t k);
// x[m, k] rounded to bf16 into xb[m, linear_bf16_x_stride(k)], zero-padded.
void linear_pack_x_bf16(const float* x, int64_t m, int64_t k, uint16_t* xb);
// y[m0:m1, n0:n1] from a.xb; single-threaded.
void linear_rows_dpbf16(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
}  // namespace avx512

// The block-weight linear (w_dtype q8_0 / q4_0 / q5_0 / q4_k / q5_k, the whole-block types, and
// q4_1; a.xq/xd/xt set): y[m0:m1, n0:n1],
// single-threaded, bitwise the arithmetic of kernels.h on every ISA. linear_q8_*.cpp; the
// VNNI one needs cpu_has_avx512_vnni().
namespace scalar {
void linear_rows_q8(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
}
namespace avx2 {
void linear_rows_q8(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
}
namespace avx512 {
void linear_rows_q8(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
void linear_rows_q8_vnni(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
// AMX-INT8 tiles for the whole-block types from kAmxMinRows x rows (linear_whole_block_amx.cpp),
// bitwise linear_rows_q8_vnni's results; other types and fewer rows run linear_rows_q8_vnni.
// Needs cpu_has_amx().
inline constexpr int64_t kAmxMinRows = 16;
void linear_rows_q8_amx(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
// The tile shapes a kernel needs (tile_config_amx.cpp), loaded into the calling thread's tiles
// at each kernel call; tile_calls() counts those calls (tests: the tiles did run). int8_blocks: C
// tiles 0 .. 3 of 16 x 16 int32, A tiles 4, 5 of 16 x 32 bytes, B tiles 6, 7 of 8 x 64 bytes; full:
// all eight 16 rows x 64 bytes (the bf16 kernel, and the peak probes of kernels_bench); one_row:
// full but C and A tiles of one row (the bf16 kernel for a single x row, decode).
enum class AmxTiles { none, int8_blocks, full, one_row };
void configure_tiles(AmxTiles kind);
int64_t tile_calls(AmxTiles kind);
}  // namespace avx512

// The same for q5_1 and q6_k (linear_qk_*.cpp): per-lane weight
// scales (kernels.h), bitwise equal on every ISA.
namespace scalar {
void linear_rows_qk(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
}
namespace avx2 {
void linear_rows_qk(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
}
namespace avx512 {
void linear_rows_qk(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
void linear_rows_qk_vnni(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
}  // namespace avx512

}  // namespace deepinfer::kernels::detail
