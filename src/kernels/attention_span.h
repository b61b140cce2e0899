#pragma once
// Internal to src/kernels: the span attention kernel paged_attention() runs on AVX-512 CPUs
// (attention_avx512.cpp) and its driver (attention_split.cpp).
//
// Keys are cut into spans of kAttendSpan positions [s * kAttendSpan, (s + 1) * kAttendSpan),
// or form one span of the whole context (GQA prefill, see paged_attention_tiles).
// attend_span() computes, for up to kMaxSpanQueries query vectors that read one kv head, the
// softmax state of one span: the running max, the denominator and the unnormalised V sum.
// It reads each K/V row of the span once per tile of queries, widening bf16 / f16 / int8 in
// registers, with the keys of a 16-key chunk along the SIMD lanes (K tiles are transposed in
// registers), so no horizontal sum per key is needed. merge_span() folds span states in
// span order. Spans depend only on key positions and every query's arithmetic depends only
// on its own position, so a result does not depend on the thread count, on which other
// queries share the call (decode == prefill bitwise), or on whether spans ran on one thread
// or were split across threads (split-K) and merged afterwards. Over one span of the whole
// context a query's arithmetic is the per-token kernel's (attend(): the same chunks of 16
// keys in order, the same register code per query), so that kernel's decode equals it
// bitwise.
#include "kernels/backend.h"

namespace deepinfer::kernels::detail {

inline constexpr int64_t kAttendSpan = 256;
inline constexpr int64_t kMaxSpanQueries = 128;

namespace avx512 {

// Floats of one query as attend_span() reads it, and the query q[head_dim] stored so at dst:
// zero-padded to whole vectors, or quantized for an int8 cache (attend_i8.h). Once per call,
// not once per span.
int64_t stored_query_floats(const AttendArgs& a);
void store_query(const AttendArgs& a, const float* q, float* dst);

// Scratch floats attend_span() needs for n queries.
int64_t attend_span_scratch_floats(const AttendArgs& a, int64_t n);

// Queries q[i] (stored by store_query) attend keys [begin, min(end, last[i] + 1)); begin is a
// multiple of 16, every last[i] >= begin and n <= kMaxSpanQueries. Writes the span's state of
// query i: acc[i][v_head_dim] (unnormalised), max[i], denom[i].
void attend_span(const AttendArgs& a, int64_t kv_head, int64_t begin, int64_t end,
                 const float* const* q, const int64_t* last, int64_t n, float* const* acc,
                 float* max, float* denom, float* scratch);

// (acc, max, denom) <- the merge of itself and one more span's state, in this order:
// m = max(max, part_max); acc = acc * e^(max - m) + part_acc * e^(part_max - m), denom alike.
// Start from acc = 0, max = -inf, denom = 0.
void merge_span(int64_t v_dim, float* acc, float* max, float* denom, const float* part_acc,
                float part_max, float part_denom);

// out[v_dim] = acc / denom.
void finish_span(int64_t v_dim, const float* acc, float denom, float* out);

}  // namespace avx512

// paged_attention() on AVX-512 in spans of kAttendSpan keys (arguments checked by the
// caller): query tiles for prefill and large batches, split-K over spans for decode.
void paged_attention_spans(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                           const AttendArgs& a, float* out, ThreadPool& pool);

// Query tiles over one span of the whole context: the multi-token paged_attention() of GQA
// groups (fewer than 16 query heads per kv head) on AVX-512. A tile of consecutive tokens'
// heads shares every K/V load, and each query's result is bitwise what attend() gives it
// alone, so decode (attend()) equals prefill.
void paged_attention_tiles(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                           const AttendArgs& a, float* out, ThreadPool& pool);

}  // namespace deepinfer::kernels::detail
