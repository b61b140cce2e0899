// Public kernel entry points: argument checks, ISA dispatch and threading. The arithmetic
// lives in the per-ISA backends (backend.h).
#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "kernels/attend_i8.h"
#include "kernels/attend_rows.h"
#include "kernels/attention_span.h"
#include "kernels/backend.h"
#include "kernels/isa.h"
#include "kernels/linear_schedule.h"
#include "kernels/quantize_x_terms.h"
#include "kernels/whole_block_layout.h"

namespace deepinfer::kernels {
namespace {

// Calls backend::fn(args...) for the active ISA.
#define DI_KERNEL_DISPATCH(fn, ...)                                            \
  do {                                                                         \
    switch (active_isa()) {                                                    \
      case Isa::avx512:                                                        \
        return detail::avx512::fn(__VA_ARGS__);                                \
      case Isa::avx2:                                                          \
        return detail::avx2::fn(__VA_ARGS__);                                  \
      case Isa::scalar:                                                        \
        return detail::scalar::fn(__VA_ARGS__);                                \
    }                                                                          \
    fail("kernels: invalid instruction set ", static_cast<int>(active_isa())); \
  } while (0)

struct LinearBackend {
  int64_t (*tile_n)();
  int64_t (*pack_stride)(int64_t, DType);
  void (*pack_x)(const float*, int64_t, int64_t, DType, float*);
  int64_t (*scratch_floats)(int64_t, DType);
  void (*rows)(const detail::LinearArgs&, int64_t, int64_t, int64_t, int64_t, float*);
};

LinearBackend linear_backend(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return {&detail::avx512::linear_tile_n, &detail::avx512::linear_pack_stride,
              &detail::avx512::linear_pack_x, &detail::avx512::linear_scratch_floats,
              &detail::avx512::linear_rows};
    case Isa::avx2:
      return {&detail::avx2::linear_tile_n, &detail::avx2::linear_pack_stride,
              &detail::avx2::linear_pack_x, &detail::avx2::linear_scratch_floats,
              &detail::avx2::linear_rows};
    case Isa::scalar:
      break;
  }
  return {&detail::scalar::linear_tile_n, &detail::scalar::linear_pack_stride,
          &detail::scalar::linear_pack_x, &detail::scalar::linear_scratch_floats,
          &detail::scalar::linear_rows};
}

// Per-thread buffers that grow to the largest size seen. Separate kinds so that a packed x
// (owned by the calling thread) is never resized by that thread's own share of the work.
enum class Buffer { packed_x, linear_work, attention_work, count };

float* thread_buffer(Buffer kind, size_t floats) {
  thread_local std::vector<float> buffers[static_cast<int>(Buffer::count)];
  std::vector<float>& buffer = buffers[static_cast<int>(kind)];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// The calling thread's x rounded to bf16 for MatmulPrecision::bf16: as f32 values (the
// fallback path) or as packed bf16 (AVX512_BF16). Apart from thread_buffer() because the
// packed_x buffer of the fallback path is filled from the rounded one.
float* rounded_x_buffer(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}
uint16_t* bf16_x_buffer(size_t elements) {
  thread_local std::vector<uint16_t> buffer;
  if (buffer.size() < elements) buffer.resize(elements);
  return buffer.data();
}

// The calling thread's x quantized for block weights (quantize_x_blocks): quants, scales and
// lane sums, and for the whole-block types each block's scale and term once (bd, bt:
// LinearArgs::xbd / xbt), grown to the largest call seen.
// For AMX tiles, tq / td / tt hold q and the block terms in tile order (LinearArgs::xtq / xtd /
// xtt).
struct QuantizedX {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> t;
  std::vector<float> bd;
  std::vector<int32_t> bt;
  std::vector<float> td;
  std::vector<int32_t> tt;
  std::vector<int8_t> tq;
};
constexpr int64_t kTileRows = 16;  // x rows of an AMX tile

// Rows of x handled by one work item when m is large, so that prefill of a narrow projection
// still gives every thread work. A multiple of every backend's row tile.
constexpr int64_t kLinearRowBlock = 256;
// AMX: a work item's rows start at a tile (linear_rows_q8_amx reads tile m0 / 16).
static_assert(kLinearRowBlock % kTileRows == 0);
// Activation elements from which quantizing x for block weights is split between threads.
constexpr int64_t kMinQuantizeSplit = int64_t{1} << 15;
// Below this many multiply-adds per thread, waking workers costs more than it saves.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 16;

QuantizedX& quantized_x_buffer(int64_t m, int64_t k) {
  thread_local QuantizedX buffer;
  const auto elements = static_cast<size_t>(m * k);
  if (buffer.q.size() < elements) buffer.q.resize(elements);
  if (buffer.d.size() < elements / 4) buffer.d.resize(elements / 4);
  if (buffer.t.size() < elements / 4) buffer.t.resize(elements / 4);
  if (buffer.bd.size() < elements / detail::kQuantBlock)
    buffer.bd.resize(elements / detail::kQuantBlock);
  if (buffer.bt.size() < elements / detail::kQuantBlock)
    buffer.bt.resize(elements / detail::kQuantBlock);
  return buffer;
}

// LinearArgs' x pointers into rows `first` .. of xq (the compact block terms for whole-block
// weight types).
void point_at_quantized_x(const QuantizedX& xq, int64_t first, int64_t k, DType w_dtype,
                          detail::LinearArgs& args) {
  args.x = nullptr;
  args.xq = xq.q.data() + first * k;
  args.xd = xq.d.data() + first * k / 4;
  args.xt = xq.t.data() + first * k / 4;
  if (is_whole_block_dtype(w_dtype)) {
    args.xbd = xq.bd.data() + first * k / detail::kQuantBlock;
    args.xbt = xq.bt.data() + first * k / detail::kQuantBlock;
  }
}

// Whether a call of m rows of w_dtype runs on AMX tiles (linear_rows_q8_amx).
bool amx_tiles(int64_t m, DType w_dtype) {
  return is_whole_block_dtype(w_dtype) && m >= detail::avx512::kAmxMinRows && amx_active();
}

// The tiles of m rows.
int64_t row_tiles(int64_t m) {
  return (m + kTileRows - 1) / kTileRows;
}

// Room for `tiles` tiles of terms in tile order (xq.td / tt).
void reserve_tile_terms(QuantizedX& xq, int64_t tiles, int64_t k) {
  const auto size = static_cast<size_t>(tiles * (k / detail::kQuantBlock) * kTileRows);
  if (xq.td.size() < size) {
    xq.td.resize(size);
    xq.tt.resize(size);
    xq.tq.resize(size * detail::kQuantBlock);
  }
}

// x rows first .. first + m - 1 (already quantized) and their block terms in tile order from
// tile `tile0` of xq.tq / td / tt (LinearArgs::xtq / xtd / xtt; reserve_tile_terms() made
// room), and args pointed at them. Tiles are independent: a prefill's are split between threads.
void order_terms_for_tiles(QuantizedX& xq, int64_t first, int64_t m, int64_t k, int64_t tile0,
                           detail::LinearArgs& args, ThreadPool& pool) {
  const int64_t blocks = k / detail::kQuantBlock;
  const auto order = [&](int64_t tile) {
    for (int64_t r = 0; r < kTileRows; ++r) {
      const int64_t row = first + std::min(tile * kTileRows + r, m - 1);
      const float* bd = xq.bd.data() + row * blocks;
      const int32_t* bt = xq.bt.data() + row * blocks;
      float* td = xq.td.data() + ((tile0 + tile) * blocks) * kTileRows + r;
      int32_t* tt = xq.tt.data() + ((tile0 + tile) * blocks) * kTileRows + r;
      const int8_t* q = xq.q.data() + row * k;
      int8_t* tq = xq.tq.data() + ((tile0 + tile) * blocks * kTileRows + r) * detail::kQuantBlock;
      for (int64_t b = 0; b < blocks; ++b) {
        td[b * kTileRows] = bd[b];
        tt[b * kTileRows] = bt[b];
        std::memcpy(tq + b * kTileRows * detail::kQuantBlock, q + b * detail::kQuantBlock,
                    detail::kQuantBlock);
      }
    }
  };
  const auto tiles = [&](int64_t t0, int64_t t1) {
    for (int64_t tile = t0; tile < t1; ++tile) order(tile);
  };
  if (m * k >= kMinQuantizeSplit && pool.size() > 1) {
    pool.parallel_for(row_tiles(m), tiles);
  } else {
    tiles(0, row_tiles(m));
  }
  args.xtq = xq.tq.data() + tile0 * blocks * kTileRows * detail::kQuantBlock;
  args.xtd = xq.td.data() + tile0 * blocks * kTileRows;
  args.xtt = xq.tt.data() + tile0 * blocks * kTileRows;
}

using RowsFn = void (*)(const detail::LinearArgs&, int64_t, int64_t, int64_t, int64_t);

// The 8-bit-activation kernels of the whole-block types and q4_1 (linear_q8_*) and of the
// per-lane-scale types q5_1 / q6_k (linear_qk_*).
RowsFn block_rows(Isa isa, DType w_dtype) {
  const bool q8 = is_whole_block_dtype(w_dtype) || w_dtype == DType::q4_1;
  switch (isa) {
    case Isa::avx512:
      if (is_whole_block_dtype(w_dtype) && amx_active()) return &detail::avx512::linear_rows_q8_amx;
      if (cpu_has_avx512_vnni())
        return q8 ? &detail::avx512::linear_rows_q8_vnni : &detail::avx512::linear_rows_qk_vnni;
      return q8 ? &detail::avx512::linear_rows_q8 : &detail::avx512::linear_rows_qk;
    case Isa::avx2:
      return q8 ? &detail::avx2::linear_rows_q8 : &detail::avx2::linear_rows_qk;
    case Isa::scalar:
      break;
  }
  return q8 ? &detail::scalar::linear_rows_q8 : &detail::scalar::linear_rows_qk;
}

// Elements per stored block of a block weight type: 32, or 256 for the k-quants.
int64_t row_granule(DType w_dtype) {
  const QuantTraits* traits = block_traits(w_dtype);
  return traits ? traits->block_size : 1;
}

// Repacked blocks (LinearArgs::w_repacked) only of the types and the ISA that repack them, and
// in output tiles of whole units (8 rows on AVX2, 16 on AVX-512): every thread's share must
// start at one.
void check_repacked_layout(bool w_repacked, DType w_dtype, Isa isa) {
  if (!w_repacked) return;
  DI_CHECK(detail::wb::reads_repacked_layout(isa) && detail::wb::has_repacked_layout(w_dtype),
           "kernels::linear: repacked ", dtype_name(w_dtype), " weights under ", isa_name(isa),
           " (q4_0, q5_0, q8_0 and q4_k are repacked, under AVX2 and AVX-512)");
  const int64_t tile_n = linear_backend(isa).tile_n();
  const int64_t unit = detail::wb::kRepackRows * detail::wb::interleaved_groups(isa);
  DI_CHECK(tile_n % unit == 0, "kernels::linear: output tiles of ", tile_n,
           " split the repacked units of ", unit, " rows");
}

void rows_dpbf16(const detail::LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                 float*) {
  detail::avx512::linear_rows_dpbf16(a, m0, m1, n0, n1);
}

// set_matmul_precision()'s value, or -1: DEEPINFER_MATMUL_PRECISION (read once), else f32.
std::atomic<int> g_matmul_precision{-1};

MatmulPrecision env_matmul_precision() {
  static const MatmulPrecision precision = [] {
    const char* value = std::getenv("DEEPINFER_MATMUL_PRECISION");
    if (value == nullptr || *value == '\0') return MatmulPrecision::f32;
    try {
      return parse_matmul_precision(value);
    } catch (const Error& e) {
      fail("DEEPINFER_MATMUL_PRECISION: ", e.what());
    }
  }();
  return precision;
}

// x[m, k] quantized for block weights into rows `first` .. first + m - 1 of xq; rows are
// independent, so a prefill's rows are split between threads.
void quantize_rows(const float* x, int64_t m, int64_t k, DType w_dtype, QuantizedX& xq,
                   int64_t first, ThreadPool& pool) {
  const detail::qx::Terms terms = detail::qx::terms_of(w_dtype);
  const Isa isa = active_isa();
  const auto quantize = [&](int64_t r0, int64_t r1) {
    const int64_t at = first + r0;
    int8_t* q = xq.q.data() + at * k;
    float* d = xq.d.data() + at * k / 4;
    int32_t* t = xq.t.data() + at * k / 4;
    if (isa == Isa::avx512) {
      detail::avx512::quantize_x_blocks(x + r0 * k, r1 - r0, k, terms, q, d, t);
    } else if (isa == Isa::avx2) {
      detail::avx2::quantize_x_blocks(x + r0 * k, r1 - r0, k, terms, q, d, t);
    } else {
      detail::quantize_x_blocks(x + r0 * k, r1 - r0, k, w_dtype, q, d, t);
    }
    if (terms.whole_block) {  // entry 0 of each block's 8 equal ones
      const int64_t blocks = (r1 - r0) * k / detail::kQuantBlock;
      float* bd = xq.bd.data() + at * k / detail::kQuantBlock;
      int32_t* bt = xq.bt.data() + at * k / detail::kQuantBlock;
      for (int64_t b = 0; b < blocks; ++b) {
        bd[b] = d[b * 8];
        bt[b] = t[b * 8];
      }
    }
  };
  if (m * k >= kMinQuantizeSplit && pool.size() > 1) {
    pool.parallel_for(m, quantize);
  } else {
    quantize(0, m);
  }
}

// Items [begin, end) of an [m, n] output in tiles of tile_n outputs by kLinearRowBlock rows,
// item (nt, mb) = nt * m_blocks + mb: per row block, the range holds a contiguous range of n
// tiles, passed to rows(m0, m1, n0, n1) as one call.
template <class Rows>
void run_item_range(int64_t m, int64_t n, int64_t tile_n, int64_t begin, int64_t end,
                    const Rows& rows) {
  const int64_t m_blocks = (m + kLinearRowBlock - 1) / kLinearRowBlock;
  const int64_t nt_first = begin / m_blocks;
  const int64_t nt_last = (end - 1) / m_blocks;
  for (int64_t mb = 0; mb < m_blocks; ++mb) {
    int64_t lo = nt_first, hi = nt_last;
    if (lo * m_blocks + mb < begin) ++lo;
    if (hi * m_blocks + mb >= end) --hi;
    if (lo > hi) continue;
    const int64_t m0 = mb * kLinearRowBlock;
    const int64_t m1 = std::min(m, m0 + kLinearRowBlock);
    rows(m0, m1, lo * tile_n, std::min(n, (hi + 1) * tile_n));
  }
}

}  // namespace

void linear(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t n,
            const float* bias, float* y, ThreadPool& pool) {
  detail::linear_with_layout(x, m, k, w, w_dtype, false, n, bias, y, pool);
}

void detail::linear_with_layout(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype,
                                bool w_repacked, int64_t n, const float* bias, float* y,
                                ThreadPool& pool) {
  DI_CHECK(m >= 0 && k >= 0 && n >= 0, "kernels::linear: negative size (m=", m, ", k=", k,
           ", n=", n, ")");
  const bool blocks = is_block_dtype(w_dtype);
  DI_CHECK(blocks || w_dtype == DType::f32 || w_dtype == DType::bf16 || w_dtype == DType::f16,
           "kernels::linear: weight dtype ", dtype_name(w_dtype),
           " is not supported (expected f32, bf16, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, "
           "q5_k or q6_k)");
  DI_CHECK(!blocks || k % row_granule(w_dtype) == 0, "kernels::linear: ", dtype_name(w_dtype),
           " weights need k to be a whole number of ", row_granule(w_dtype),
           "-element blocks, got k = ", k);
  if (m == 0 || n == 0) return;
  DI_CHECK(y != nullptr && (k == 0 || (x != nullptr && w != nullptr)),
           "kernels::linear: null data pointer (m=", m, ", k=", k, ", n=", n, ")");
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias ? bias[j] : 0.0f;
    return;
  }

  const Isa isa = active_isa();
  check_repacked_layout(w_repacked, w_dtype, isa);
  LinearBackend be = linear_backend(isa);
  detail::LinearArgs args{x, k, k, w, w_dtype, n, bias, y};
  const bool bf16_x = w_dtype == DType::bf16 && matmul_precision() == MatmulPrecision::bf16;
  const bool dpbf16 = bf16_x && isa == Isa::avx512 && cpu_has_avx512_bf16();
  RowsFn q_rows = nullptr;
  if (blocks) {
    // Each x row is quantized once here; every weight row then reuses it.
    QuantizedX& xq = quantized_x_buffer(m, k);
    quantize_rows(x, m, k, w_dtype, xq, 0, pool);
    point_at_quantized_x(xq, 0, k, w_dtype, args);
    if (amx_tiles(m, w_dtype)) {
      reserve_tile_terms(xq, row_tiles(m), k);
      order_terms_for_tiles(xq, 0, m, k, 0, args, pool);
    }
    args.w_repacked = w_repacked;
    q_rows = block_rows(isa, w_dtype);
  } else if (dpbf16) {
    const int64_t stride = detail::avx512::linear_bf16_x_stride(k);
    uint16_t* xb = bf16_x_buffer(static_cast<size_t>(m * stride));
    detail::avx512::linear_pack_x_bf16(x, m, k, xb);
    args.x = nullptr;
    args.xb = xb;
    args.x_stride = stride;
    be.rows = &rows_dpbf16;
    be.scratch_floats = [](int64_t, DType) -> int64_t { return 0; };
  } else if (bf16_x) {
    // No vdpbf16ps here: the rounded x goes through the exact path.
    float* rounded = rounded_x_buffer(static_cast<size_t>(m * k));
    for (int64_t p = 0; p < m * k; ++p) rounded[p] = bf16_to_f32(f32_to_bf16(x[p]));
    args.x = x = rounded;
  }
  const int64_t stride = dpbf16 || blocks ? 0 : be.pack_stride(k, w_dtype);
  if (stride > 0) {
    float* packed = thread_buffer(Buffer::packed_x, static_cast<size_t>(m * stride));
    be.pack_x(x, m, k, w_dtype, packed);
    args.x = packed;
    args.x_stride = stride;
  }

  const int64_t tile_n = be.tile_n();
  const int64_t n_tiles = (n + tile_n - 1) / tile_n;
  const int64_t m_blocks = (m + kLinearRowBlock - 1) / kLinearRowBlock;
  const int64_t items = n_tiles * m_blocks;  // n-tile major: a thread keeps its weight rows
  const int64_t macs_per_item = std::min(m, kLinearRowBlock) * tile_n * k;
  const int64_t min_chunk = std::max<int64_t>(1, kMinMacsPerThread / macs_per_item);
  const size_t scratch_floats = blocks ? 0 : static_cast<size_t>(be.scratch_floats(k, w_dtype));

  detail::run_items_stealing(pool, items, min_chunk, [&](int64_t begin, int64_t end) {
    float* scratch = scratch_floats ? thread_buffer(Buffer::linear_work, scratch_floats) : nullptr;
    run_item_range(m, n, tile_n, begin, end, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      if (q_rows) {
        q_rows(args, m0, m1, n0, n1);
      } else {
        be.rows(args, m0, m1, n0, n1, scratch);
      }
    });
  });
}

void linear_grouped(std::span<const LinearJob> jobs, int64_t k, DType w_dtype, int64_t n,
                    ThreadPool& pool, bool w_repacked) {
  DI_CHECK(is_block_dtype(w_dtype), "kernels::linear_grouped: weight dtype ", dtype_name(w_dtype),
           " is not a block type");
  DI_CHECK(k > 0 && n >= 0 && k % row_granule(w_dtype) == 0,
           "kernels::linear_grouped: ", dtype_name(w_dtype),
           " weights need k to be a positive whole number of ", row_granule(w_dtype),
           "-element blocks, got k = ", k);
  // Each job's first quantized x row (a job with the x of the one before it shares its rows:
  // q / k / v or gate / up of one input) and first work item.
  std::vector<int64_t> row0(jobs.size(), 0), item0(jobs.size() + 1, 0);
  std::vector<char> shares_x(jobs.size(), 0);
  const int64_t tile_n = linear_backend(active_isa()).tile_n();
  const auto outputs = [n](const LinearJob& job) { return job.n > 0 ? job.n : n; };
  int64_t largest = 1, rows = 0, out_total = 0;
  for (size_t g = 0; g < jobs.size(); ++g) {
    const LinearJob& job = jobs[g];
    DI_CHECK(job.m >= 0 && job.n >= 0 && (job.m == 0 || (job.x && job.w && job.y)),
             "kernels::linear_grouped: job ", g, " has m = ", job.m, ", n = ", job.n,
             " or a null pointer");
    shares_x[g] = g > 0 && job.x == jobs[g - 1].x && job.m == jobs[g - 1].m;
    row0[g] = shares_x[g] ? row0[g - 1] : rows;
    if (!shares_x[g]) rows += job.m;
    const int64_t n_tiles = (outputs(job) + tile_n - 1) / tile_n;
    item0[g + 1] = item0[g] + n_tiles * ((job.m + kLinearRowBlock - 1) / kLinearRowBlock);
    largest = std::max(largest, job.m);
    out_total += job.m * outputs(job);
  }
  if (out_total == 0) return;
  check_repacked_layout(w_repacked, w_dtype, active_isa());
  QuantizedX& xq = quantized_x_buffer(rows, k);
  for (size_t g = 0; g < jobs.size(); ++g)
    if (!shares_x[g]) quantize_rows(jobs[g].x, jobs[g].m, k, w_dtype, xq, row0[g], pool);
  // AMX: each x with enough rows for tiles, and its terms, in tile order (none for decode).
  std::vector<detail::LinearArgs> tile_terms;
  if (amx_tiles(largest, w_dtype)) {
    tile_terms.resize(jobs.size());
    int64_t all_tiles = 0;
    for (size_t g = 0; g < jobs.size(); ++g)
      if (!shares_x[g] && amx_tiles(jobs[g].m, w_dtype)) all_tiles += row_tiles(jobs[g].m);
    reserve_tile_terms(xq, all_tiles, k);
    for (int64_t g = 0, tiles = 0; g < static_cast<int64_t>(jobs.size()); ++g) {
      if (shares_x[g]) {
        tile_terms[g] = tile_terms[g - 1];
      } else if (amx_tiles(jobs[g].m, w_dtype)) {
        order_terms_for_tiles(xq, row0[g], jobs[g].m, k, tiles, tile_terms[g], pool);
        tiles += row_tiles(jobs[g].m);
      }
    }
  }
  const RowsFn q_rows = block_rows(active_isa(), w_dtype);
  const int64_t macs_per_item = std::min(largest, kLinearRowBlock) * tile_n * k;
  const int64_t min_chunk = std::max<int64_t>(1, kMinMacsPerThread / macs_per_item);
  // Items job-major, each job's numbered as in linear(): a thread's share walks the jobs' weight
  // rows in order, so its decode prefetch runs across the whole group.
  detail::run_items_stealing(pool, item0.back(), min_chunk, [&](int64_t begin, int64_t end) {
    for (size_t g = 0; g < jobs.size(); ++g) {
      const int64_t lo = std::max(begin, item0[g]), hi = std::min(end, item0[g + 1]);
      if (lo >= hi) continue;
      const LinearJob& job = jobs[g];
      detail::LinearArgs args{nullptr, k, k, job.w, w_dtype, outputs(job), nullptr, job.y};
      args.w_repacked = w_repacked;
      point_at_quantized_x(xq, row0[g], k, w_dtype, args);
      if (!tile_terms.empty()) {
        args.xtd = tile_terms[g].xtd;
        args.xtt = tile_terms[g].xtt;
        args.xtq = tile_terms[g].xtq;
      }
      run_item_range(
          job.m, outputs(job), tile_n, lo - item0[g], hi - item0[g],
          [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { q_rows(args, m0, m1, n0, n1); });
    }
  });
}

std::string_view block_linear_path() {
  switch (active_isa()) {
    case Isa::avx512:
      if (amx_active()) return "AMX-INT8 tiles from 16 rows and AVX-512 VNNI";
      return cpu_has_avx512_vnni() ? "AVX-512 VNNI" : "AVX-512";
    case Isa::avx2:
      return "AVX2";
    case Isa::scalar:
      break;
  }
  return "scalar";
}

void set_matmul_precision(MatmulPrecision precision) {
  g_matmul_precision.store(static_cast<int>(precision), std::memory_order_relaxed);
}

MatmulPrecision matmul_precision() {
  const int set = g_matmul_precision.load(std::memory_order_relaxed);
  return set >= 0 ? static_cast<MatmulPrecision>(set) : env_matmul_precision();
}

std::string_view bf16_activation_path() {
  if (amx_active()) return "AMX-BF16 tiles";
  if (active_isa() == Isa::avx512 && cpu_has_avx512_bf16()) return "AVX-512 BF16 (vdpbf16ps)";
  return "rounded x, f32 FMA";
}

std::string_view matmul_precision_name(MatmulPrecision precision) {
  return precision == MatmulPrecision::bf16 ? "bf16" : "f32";
}

MatmulPrecision parse_matmul_precision(std::string_view name) {
  if (name == "f32") return MatmulPrecision::f32;
  if (name == "bf16") return MatmulPrecision::bf16;
  fail("unknown matmul precision '", name,
       "' (expected f32: exact, or bf16: activations rounded to bf16 for bf16 weights)");
}

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y) {
  DI_CHECK(rows >= 0 && dim > 0, "kernels::rms_norm: bad shape rows=", rows, ", dim=", dim);
  DI_KERNEL_DISPATCH(rms_norm, x, weight, rows, dim, eps, y);
}

void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos, const float* sin, RopeLayout layout) {
  DI_CHECK(
      tokens >= 0 && heads >= 0 && rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim,
      "kernels::rope: rotary_dim ", rotary_dim, " must be even and at most head_dim ", head_dim);
  DI_KERNEL_DISPATCH(rope, x, tokens, heads, head_dim, rotary_dim, cos, sin, layout);
}

void softmax(float* x, int64_t rows, int64_t cols) {
  DI_CHECK(rows >= 0 && cols > 0, "kernels::softmax: bad shape rows=", rows, ", cols=", cols);
  DI_KERNEL_DISPATCH(softmax, x, rows, cols);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  DI_CHECK(n >= 0, "kernels::silu_mul: negative size ", n);
  DI_KERNEL_DISPATCH(silu_mul, gate, up, out, n);
}

void layer_norm(const float* x, const float* weight, const float* bias, int64_t rows, int64_t dim,
                float eps, float* y) {
  DI_CHECK(rows >= 0 && dim > 0, "kernels::layer_norm: bad shape rows=", rows, ", dim=", dim);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const auto mean = static_cast<float>(sum / static_cast<double>(dim));
    double squares = 0.0;
    for (int64_t i = 0; i < dim; ++i) squares += static_cast<double>(xr[i] - mean) * (xr[i] - mean);
    const auto inv = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(dim) + eps));
    float* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
  }
}

void add(const float* a, const float* b, float* out, int64_t n) {
  DI_CHECK(n >= 0, "kernels::add: negative size ", n);
  DI_KERNEL_DISPATCH(add, a, b, out, n);
}

void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* y) {
  DI_CHECK(rows >= 0 && dim > 0, "kernels::add_rms_norm: bad shape rows=", rows, ", dim=", dim);
  DI_KERNEL_DISPATCH(add_rms_norm, residual, x, weight, rows, dim, eps, y);
}

namespace {

void check_cache_dtype(const detail::AttendArgs& a) {
  DI_CHECK(a.dtype == DType::f32 || a.dtype == DType::bf16 || a.dtype == DType::f16 ||
               a.dtype == DType::i8,
           "kernels::paged_attention: a KV cache of ", dtype_name(a.dtype),
           " is not supported (f32, bf16, f16 or i8)");
  if (a.dtype != DType::i8) return;
  DI_CHECK(a.k_scale != nullptr && a.v_scale != nullptr && a.group > 0 &&
               a.head_dim % a.group == 0 && a.v_head_dim % a.group == 0 &&
               a.v_row_stride % a.group == 0,
           "kernels::paged_attention: an int8 cache needs K and V scales and a quant_group (",
           a.group, ") dividing head_dim ", a.head_dim, ", v_head_dim ", a.v_head_dim,
           " and the V row stride ", a.v_row_stride);
  DI_CHECK(a.group <= detail::kMaxI8ScoreGroup,
           "kernels::paged_attention: an int8 cache's quant_group ", a.group, " exceeds ",
           detail::kMaxI8ScoreGroup, " (its integer score sums must stay exact in f32)");
}

// Query heads per kv head from which AVX-512 runs the span kernel (attention_span.h).
constexpr int64_t kSpanKernelMinGroup = 16;

// Above this, a multi-token call reads a non-f32 cache in place (widening per query).
constexpr int64_t kMaxWidenedContextBytes = int64_t{256} << 20;

// The K/V rows of positions [0, context) of a non-f32 cache as f32, position-major, and a
// one-block f32 view of them. Widening is exact (bf16/f16) or one multiply (int8), the same
// values attend() widens chunk by chunk, so attending over this view gives bitwise the same
// result: a prefill widens each row once instead of once per query token. (Not for an int8
// cache that scores on integers, attend_i8.h: that one is read in place.)
class WidenedContext {
 public:
  // v_in_k: V rows are the leading part of the K rows (detail::v_within_k).
  WidenedContext(const PagedKv& kv, bool v_in_k, int64_t context, ThreadPool& pool) {
    const int64_t v_stride = kv.v_row_stride ? kv.v_row_stride : kv.v_head_dim;
    const int64_t rows = context * kv.kv_heads;
    k_.resize(static_cast<size_t>(rows * kv.head_dim));
    if (!v_in_k) v_.resize(static_cast<size_t>(rows * kv.v_head_dim));
    pool.parallel_for(context, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t block = kv.block_table[static_cast<size_t>(p / kv.block_size)];
        const int64_t slot = block * kv.block_size + p % kv.block_size;
        widen(kv, kv.k, kv.k_scale, slot, kv.head_dim, kv.kv_heads * kv.head_dim,
              &k_[static_cast<size_t>(p * kv.kv_heads * kv.head_dim)]);
        if (!v_in_k)
          widen(kv, kv.v, kv.v_scale, slot, v_stride, kv.kv_heads * kv.v_head_dim,
                &v_[static_cast<size_t>(p * kv.kv_heads * kv.v_head_dim)]);
      }
    });
    table_ = 0;
    view_ = kv;
    view_.dtype = DType::f32;
    view_.k_scale = view_.v_scale = nullptr;
    view_.quant_group = 0;
    view_.k = k_.data();
    view_.v = v_in_k ? k_.data() : v_.data();
    view_.v_row_stride = v_in_k ? kv.head_dim : 0;
    view_.block_size = context;
    view_.head_rows = 0;  // position-major, the heads of a position side by side
    view_.block_table = std::span<const int32_t>(&table_, 1);
  }
  const PagedKv& view() const { return view_; }

  static int64_t bytes(const PagedKv& kv, int64_t context) {
    return context * kv.kv_heads * (kv.head_dim + kv.v_head_dim) *
           static_cast<int64_t>(sizeof(float));
  }

 private:
  // `count` elements of the kv heads' rows of `slot` (kv_cache_row; row stride `stride`
  // elements; when stride exceeds the row width only the leading part is read), one head at a
  // time.
  static void widen(const PagedKv& kv, const void* store, const float* scales, int64_t slot,
                    int64_t stride, int64_t count, float* dst) {
    const int64_t width = count / kv.kv_heads;
    for (int64_t h = 0; h < kv.kv_heads; ++h) {
      const int64_t at = kv_cache_row(slot, h, kv.kv_heads, kv.head_rows) * stride;
      float* d = dst + h * width;
      if (kv.dtype == DType::i8) {
        dequantize_i8(static_cast<const int8_t*>(store) + at, scales + at / kv.quant_group,
                      kv.quant_group, static_cast<size_t>(width), d);
      } else {
        convert_to_f32(
            static_cast<const char*>(store) + at * static_cast<int64_t>(dtype_size(kv.dtype)),
            kv.dtype, d, static_cast<size_t>(width));
      }
    }
  }

  std::vector<float> k_, v_;
  int32_t table_ = 0;
  PagedKv view_;
};

// Tokens per work item of the AVX2 multi-token attention (attend_tokens).
constexpr int64_t kAvx2TokensPerTile = 8;

// A multi-token call on AVX2: work items of kAvx2TokensPerTile consecutive tokens' heads of one
// kv head, which share every chunk of keys; bitwise the per-token attend() of each token.
void paged_attention_token_tiles_avx2(const float* q, int64_t tokens, const int32_t* positions,
                                      int64_t heads, const detail::AttendArgs& args, float* out,
                                      ThreadPool& pool) {
  const int64_t group = heads / args.kv_heads;
  const int64_t tiles = (tokens + kAvx2TokensPerTile - 1) / kAvx2TokensPerTile;
  const int64_t items = tiles * args.kv_heads;
  const size_t scratch_size = static_cast<size_t>(
      detail::avx2::attend_tokens_scratch_floats(args, kAvx2TokensPerTile, group));
  // Later tokens attend to more keys: items are dealt round-robin to balance the triangle.
  const int64_t lanes = std::min<int64_t>(pool.size(), items);
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end) {
    float* scratch = thread_buffer(Buffer::attention_work, scratch_size);
    for (int64_t lane = lane_begin; lane < lane_end; ++lane) {
      for (int64_t item = lane; item < items; item += lanes) {
        const int64_t t0 = item / args.kv_heads * kAvx2TokensPerTile;
        const int64_t kv_head = item % args.kv_heads;
        const int64_t n = std::min(kAvx2TokensPerTile, tokens - t0);
        int64_t pos[kAvx2TokensPerTile];
        for (int64_t i = 0; i < n; ++i) pos[i] = positions[t0 + i];
        const int64_t h = kv_head * group;
        detail::avx2::attend_tokens(
            args, q + (t0 * heads + h) * args.head_dim, heads * args.head_dim, n, group, pos,
            kv_head, out + (t0 * heads + h) * args.v_head_dim, heads * args.v_head_dim, scratch);
      }
    }
  });
}

// paged_attention, with query_tiles: paged_attention_query_tiles.
void paged_attention_with(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                          const PagedKv& kv, float scale, float* out, ThreadPool& pool,
                          bool query_tiles) {
  DI_CHECK(tokens >= 0 && heads > 0 && kv.kv_heads > 0 && heads % kv.kv_heads == 0,
           "kernels::paged_attention: ", heads, " query heads cannot share ", kv.kv_heads,
           " kv heads (heads must be a positive multiple of kv_heads)");
  DI_CHECK(kv.block_size > 0 && kv.head_dim > 0 && kv.v_head_dim > 0,
           "kernels::paged_attention: bad cache geometry (block_size=", kv.block_size,
           ", head_dim=", kv.head_dim, ", v_head_dim=", kv.v_head_dim, ")");
  if (tokens == 0) return;
  int64_t max_pos = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    DI_CHECK(positions[t] >= 0, "kernels::paged_attention: token ", t, " has negative position ",
             positions[t]);
    max_pos = std::max<int64_t>(max_pos, positions[t]);
  }
  const int64_t blocks_needed = max_pos / kv.block_size + 1;
  DI_CHECK(static_cast<int64_t>(kv.block_table.size()) >= blocks_needed,
           "kernels::paged_attention: position ", max_pos, " needs ", blocks_needed, " blocks of ",
           kv.block_size, " but the block table has ", kv.block_table.size());
  for (int64_t b = 0; b < blocks_needed; ++b)
    DI_CHECK(kv.block_table[static_cast<size_t>(b)] >= 0,
             "kernels::paged_attention: block table entry ", b, " is negative (",
             kv.block_table[static_cast<size_t>(b)], ")");

  DI_CHECK(kv.v_row_stride == 0 || kv.v_row_stride >= kv.v_head_dim,
           "kernels::paged_attention: v_row_stride ", kv.v_row_stride,
           " is shorter than a V row (v_head_dim ", kv.v_head_dim, ")");

  detail::AttendArgs args{
      kv.k,        kv.v,          kv.block_table.data(), kv.block_size, kv.kv_heads,
      kv.head_dim, kv.v_head_dim, kv.v_row_stride,       scale,         kv.dtype,
      kv.k_scale,  kv.v_scale,    kv.quant_group,        kv.head_rows};
  if (args.v_row_stride == 0) args.v_row_stride = kv.v_head_dim;
  check_cache_dtype(args);
  // The span kernel (split-K over spans, wide tiles) wins where many query heads share a kv
  // head (MLA absorbed decode: 16+ heads on one latent row); GQA groups decode with the
  // per-token kernel below, which on AVX-512 is the same register tiles over a whole context,
  // software-pipelined (docs/PERFORMANCE.md, "GQA decode attention"), and prefill with query
  // tiles of several tokens over the whole context, whose per-query arithmetic is that
  // kernel's. The choice depends on the shape only, so batch and thread invariance hold.
  const Isa isa = active_isa();
  // Several tokens, enough (token, kv head) pairs for the threads: token tiles.
  const bool token_tiles = tokens > 1 && tokens * kv.kv_heads >= pool.size();
  if (isa == Isa::avx512 && (query_tiles || heads / kv.kv_heads >= kSpanKernelMinGroup)) {
    detail::paged_attention_spans(q, tokens, positions, heads, args, out, pool);
    return;
  }
  if (isa == Isa::avx512 && token_tiles) {
    detail::paged_attention_tiles(q, tokens, positions, heads, args, out, pool);
    return;
  }
  if (kv.dtype != DType::f32 && !detail::i8_integer_scores(args) && tokens > 1 &&
      WidenedContext::bytes(kv, max_pos + 1) <= kMaxWidenedContextBytes) {
    const WidenedContext widened(kv, detail::v_within_k(args), max_pos + 1, pool);
    paged_attention_with(q, tokens, positions, heads, widened.view(), scale, out, pool,
                         query_tiles);
    return;
  }
  if (isa == Isa::avx2 && token_tiles) {
    paged_attention_token_tiles_avx2(q, tokens, positions, heads, args, out, pool);
    return;
  }
  auto attend = isa == Isa::avx512 ? &detail::avx512::attend
                : isa == Isa::avx2 ? &detail::avx2::attend
                                   : &detail::scalar::attend;
  auto scratch_floats = isa == Isa::avx512 ? &detail::avx512::attend_scratch_floats
                        : isa == Isa::avx2 ? &detail::avx2::attend_scratch_floats
                                           : &detail::scalar::attend_scratch_floats;

  // A work item is one token's query heads that share a kv head (they then share every K/V
  // load), split further only when there are too few items for the threads. Per-head results
  // do not depend on the split.
  const int64_t group = heads / kv.kv_heads;
  const int64_t units = tokens * kv.kv_heads;
  const int64_t splits = std::clamp<int64_t>((pool.size() + units - 1) / units, 1, group);
  const int64_t heads_per_item = (group + splits - 1) / splits;
  const int64_t items = units * splits;
  const size_t scratch_size = static_cast<size_t>(scratch_floats(args, heads_per_item));
  // Later tokens of a prefill attend to more keys, so items are dealt round-robin to lanes
  // (not in contiguous ranges) to balance the causal triangle.
  const int64_t lanes = std::min<int64_t>(pool.size(), items);
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end) {
    float* scratch = thread_buffer(Buffer::attention_work, scratch_size);
    for (int64_t lane = lane_begin; lane < lane_end; ++lane) {
      for (int64_t item = lane; item < items; item += lanes) {
        const int64_t unit = item / splits, part = item % splits;
        const int64_t t = unit / kv.kv_heads, kv_head = unit % kv.kv_heads;
        const int64_t first = part * heads_per_item;
        const int64_t count = std::min(heads_per_item, group - first);
        if (count <= 0) continue;
        const int64_t h = kv_head * group + first;
        attend(args, q + (t * heads + h) * kv.head_dim, count, positions[t], kv_head,
               out + (t * heads + h) * kv.v_head_dim, scratch);
      }
    }
  });
}

}  // namespace

void paged_attention(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                     const PagedKv& kv, float scale, float* out, ThreadPool& pool) {
  paged_attention_with(q, tokens, positions, heads, kv, scale, out, pool, false);
}

void paged_attention_query_tiles(const float* q, int64_t tokens, const int32_t* positions,
                                 int64_t heads, const PagedKv& kv, float scale, float* out,
                                 ThreadPool& pool) {
  paged_attention_with(q, tokens, positions, heads, kv, scale, out, pool, true);
}

}  // namespace deepinfer::kernels
