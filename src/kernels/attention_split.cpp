// paged_attention() on AVX-512: work items over (tokens, kv heads, spans), split-K for decode
// and the span merge, and the whole-context query tiles of GQA prefill (attention_span.h).
// Baseline code: threading and buffers only.
#include <algorithm>
#include <vector>

#include "kernels/attention_span.h"
#include "kernels/linear_schedule.h"

namespace deepinfer::kernels::detail {
namespace {

// Query vectors per prefill tile: several tokens' heads share every K/V load of a span.
constexpr int64_t kTileQueries = 64;

float* thread_floats(size_t n) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// The calling thread's span states of a split-K call (no zeroing: every slot is written).
float* partial_floats(size_t n) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// The call's queries as attend_span() reads them (avx512::store_query), stored once for all
// spans: [tokens * heads][stored_query_floats] in the calling thread's buffer, or q itself
// where that is already the layout (rows of whole vectors, not quantized: a quantized query
// is never head_dim floats).
const float* stored_queries(const float* q, int64_t count, const AttendArgs& a, ThreadPool& pool) {
  const int64_t per = avx512::stored_query_floats(a);
  if (per == a.head_dim) return q;
  thread_local std::vector<float> buffer;
  if (buffer.size() < static_cast<size_t>(count * per))
    buffer.resize(static_cast<size_t>(count * per));
  float* stored = buffer.data();
  auto store = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      avx512::store_query(a, q + i * a.head_dim, stored + i * per);
  };
  // A decode step's few heads are not worth a hand-off to the pool.
  if (count * a.head_dim < (int64_t{1} << 14)) {
    store(0, count);
  } else {
    pool.parallel_for(count, store);
  }
  return stored;
}

int64_t spans_of(int64_t pos) {
  return pos / kAttendSpan + 1;
}

// Query tiles: per item, a tile of `per_tile` consecutive tokens' heads of one kv head (all of
// them, or a part of at most kMaxSpanQueries), over spans of `span_keys` keys in order on one
// thread, merged as they come. Later tokens read more keys, so items are dealt round-robin to
// balance the causal triangle.
void run_query_tiles(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                     const AttendArgs& a, float* out, ThreadPool& pool, int64_t span_keys,
                     int64_t per_tile) {
  const int64_t group = heads / a.kv_heads;
  const int64_t dv = a.v_head_dim;
  const int64_t max_part = std::min(group, kMaxSpanQueries);
  const int64_t parts = (group + max_part - 1) / max_part;
  const int64_t tiles = (tokens + per_tile - 1) / per_tile;
  const int64_t items = tiles * a.kv_heads * parts;
  const int64_t n_max = per_tile * max_part;
  const int64_t lanes = std::min<int64_t>(pool.size(), items);
  const size_t scratch_size =
      static_cast<size_t>(n_max * (2 * dv + 2) + avx512::attend_span_scratch_floats(a, n_max));
  const float* stored = stored_queries(q, tokens * heads, a, pool);
  const int64_t per = avx512::stored_query_floats(a);
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end) {
    float* buf = thread_floats(scratch_size);
    float* run_acc = buf;                   // [n][dv] running state
    float* run_max = run_acc + n_max * dv;  // [n]
    float* run_den = run_max + n_max;       // [n]
    float* part_acc = run_den + n_max;      // [n][dv] one span's state
    float* scratch = part_acc + n_max * dv;
    for (int64_t lane = lane_begin; lane < lane_end; ++lane) {
      for (int64_t item = lane; item < items; item += lanes) {
        const int64_t tile = item / (a.kv_heads * parts);
        const int64_t kv_head = item / parts % a.kv_heads, part = item % parts;
        const int64_t t0 = tile * per_tile, t1 = std::min(tokens, t0 + per_tile);
        const int64_t h0 = kv_head * group + part * max_part;
        const int64_t nh = std::min(max_part, group - part * max_part);
        const int64_t n = (t1 - t0) * nh;
        int64_t spans = 0;
        for (int64_t t = t0; t < t1; ++t)
          spans = std::max<int64_t>(spans, positions[t] / span_keys + 1);
        for (int64_t i = 0; i < n; ++i) {
          std::fill_n(run_acc + i * dv, dv, 0.0f);
          run_max[i] = -__builtin_inff();
          run_den[i] = 0.0f;
        }
        for (int64_t s = 0; s < spans; ++s) {
          const float* qs[kMaxSpanQueries];
          int64_t last[kMaxSpanQueries], which[kMaxSpanQueries];
          float* accs[kMaxSpanQueries];
          float pmax[kMaxSpanQueries], pden[kMaxSpanQueries];
          int64_t m = 0;
          for (int64_t i = 0; i < n; ++i) {
            const int64_t t = t0 + i / nh, h = h0 + i % nh;
            if (positions[t] < s * span_keys) continue;
            qs[m] = stored + (t * heads + h) * per;
            last[m] = positions[t];
            // One span: its state is the result (merging it into the empty state would give
            // the same bits), written in place; every query reads span 0, so m == i.
            accs[m] = (spans == 1 ? run_acc : part_acc) + i * dv;
            which[m++] = i;
          }
          float* const span_max = spans == 1 ? run_max : pmax;
          float* const span_den = spans == 1 ? run_den : pden;
          avx512::attend_span(a, kv_head, s * span_keys, (s + 1) * span_keys, qs, last, m, accs,
                              span_max, span_den, scratch);
          if (spans == 1) continue;
          for (int64_t j = 0; j < m; ++j) {
            const int64_t i = which[j];
            avx512::merge_span(dv, run_acc + i * dv, run_max + i, run_den + i, accs[j], pmax[j],
                               pden[j]);
          }
        }
        for (int64_t i = 0; i < n; ++i) {
          const int64_t t = t0 + i / nh, h = h0 + i % nh;
          avx512::finish_span(dv, run_acc + i * dv, run_den[i], out + (t * heads + h) * dv);
        }
      }
    }
  });
}

}  // namespace

void paged_attention_tiles(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                           const AttendArgs& a, float* out, ThreadPool& pool) {
  // One span longer than any int32 position: the whole context.
  constexpr int64_t kWholeContext = int64_t{1} << 31;
  // 16 tokens per tile where their heads fit in kMaxSpanQueries: whole groups of 16 queries,
  // which the span kernel runs as wide tiles (queries along the lanes, no K transposes).
  const int64_t nh = std::min(heads / a.kv_heads, kMaxSpanQueries);
  const int64_t per_tile =
      16 * nh <= kMaxSpanQueries ? 16 : std::max<int64_t>(1, kMaxSpanQueries / nh);
  run_query_tiles(q, tokens, positions, heads, a, out, pool, kWholeContext, per_tile);
}

void paged_attention_spans(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                           const AttendArgs& a, float* out, ThreadPool& pool) {
  const int64_t group = heads / a.kv_heads;
  const int64_t dv = a.v_head_dim;
  const int64_t threads = pool.size();
  const int64_t max_part = std::min(group, kMaxSpanQueries);

  if (tokens * a.kv_heads >= 4 * threads) {
    // Prefill and large batches: query tiles over spans of kAttendSpan keys.
    run_query_tiles(q, tokens, positions, heads, a, out, pool, kAttendSpan,
                    std::max<int64_t>(1, kTileQueries / max_part));
    return;
  }

  // Decode and small batches: split-K. Every (token, span, kv head, head part) is an item
  // whose span state goes to `partials`; then each (token, head) merges its spans in span
  // order. The same arithmetic as above, so the result does not depend on the mode either.
  std::vector<int64_t> span_base(static_cast<size_t>(tokens) + 1, 0);
  for (int64_t t = 0; t < tokens; ++t)
    span_base[static_cast<size_t>(t) + 1] =
        span_base[static_cast<size_t>(t)] + spans_of(positions[t]);
  const int64_t slots = span_base[static_cast<size_t>(tokens)];
  std::vector<int64_t> slot_token(static_cast<size_t>(slots));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t s = span_base[static_cast<size_t>(t)]; s < span_base[static_cast<size_t>(t) + 1];
         ++s)
      slot_token[static_cast<size_t>(s)] = t;
  // Items are dealt by work stealing: a context's last span is short, so equal shares of
  // items are not equal work.
  const int64_t units = slots * a.kv_heads;
  const int64_t parts =
      std::clamp<int64_t>((threads + units - 1) / units, (group + max_part - 1) / max_part, group);
  const int64_t per_part = (group + parts - 1) / parts;
  const int64_t row = dv + 2;  // acc, max, denom
  float* partials = partial_floats(static_cast<size_t>(slots * heads * row));
  const size_t scratch_size = static_cast<size_t>(avx512::attend_span_scratch_floats(a, per_part));
  const float* stored = stored_queries(q, tokens * heads, a, pool);
  const int64_t per = avx512::stored_query_floats(a);
  run_items_stealing(pool, units * parts, 1, [&](int64_t begin, int64_t end) {
    float* scratch = thread_floats(scratch_size);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t slot = item / (a.kv_heads * parts);
      const int64_t kv_head = item / parts % a.kv_heads, part = item % parts;
      const int64_t t = slot_token[static_cast<size_t>(slot)];
      const int64_t s = slot - span_base[static_cast<size_t>(t)];
      const int64_t h0 = kv_head * group + part * per_part;
      const int64_t n = std::min(per_part, group - part * per_part);
      if (n <= 0) continue;
      const float* qs[kMaxSpanQueries];
      int64_t last[kMaxSpanQueries];
      float* accs[kMaxSpanQueries];
      float pmax[kMaxSpanQueries], pden[kMaxSpanQueries];
      for (int64_t i = 0; i < n; ++i) {
        qs[i] = stored + (t * heads + h0 + i) * per;
        last[i] = positions[t];
        accs[i] = partials + (slot * heads + h0 + i) * row;
      }
      avx512::attend_span(a, kv_head, s * kAttendSpan, (s + 1) * kAttendSpan, qs, last, n, accs,
                          pmax, pden, scratch);
      for (int64_t i = 0; i < n; ++i) {
        accs[i][dv] = pmax[i];
        accs[i][dv + 1] = pden[i];
      }
    }
  });
  pool.parallel_for(tokens * heads, [&](int64_t begin, int64_t end) {
    float* acc = thread_floats(static_cast<size_t>(dv));
    for (int64_t th = begin; th < end; ++th) {
      const int64_t t = th / heads, h = th % heads;
      std::fill_n(acc, dv, 0.0f);
      float max = -__builtin_inff(), denom = 0.0f;
      for (int64_t slot = span_base[static_cast<size_t>(t)];
           slot < span_base[static_cast<size_t>(t) + 1]; ++slot) {
        const float* p = partials + (slot * heads + h) * row;
        avx512::merge_span(dv, acc, &max, &denom, p, p[dv], p[dv + 1]);
      }
      avx512::finish_span(dv, acc, denom, out + th * dv);
    }
  });
}

}  // namespace deepinfer::kernels::detail
