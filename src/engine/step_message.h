#pragma once
// The lockstep wire format (lockstep.h): one message per step of rank 0's model, in one
// place so it can grow (per-rank batches, pipeline stages) without touching the loops.
//
// A message is a fixed-size header of kHeaderWords int64 (broadcast first, with the idle
// wait) and a payload whose size the header implies. Word 0 is kWireMagic | version: a rank
// built from other sources refuses the first message rather than misreading it, and since
// the header's size never changes, even a newer header is received whole and refused cleanly.
//
// Payload of a step: int64 [begin, count, table length, attention group] per sequence, then
// the logit rows,
// then int32 tokens, positions and the block tables, concatenated.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cache/kv_cache.h"
#include "model/forward_batch.h"

namespace deepinfer::engine {

constexpr size_t kHeaderWords = 32;          // room to grow; only the first fields are used
constexpr int64_t kWireMagic = 0x4450'0000;  // "DP"
constexpr int64_t kWireVersion = 3;          // 1: no model index; 2: no attention group
constexpr size_t kWidePerSequence = 4;       // int64 fields per sequence

enum class StepKind : int64_t {
  stop = 0,  // the model `model` is done: its follower stops following it
  step = 1,  // run `batch` through model `model` with a KV cache of geometry `cache`
};

struct StepHeader {
  StepKind kind = StepKind::stop;
  // Which of the models a worker follows (a command may load several, as validate does:
  // the model under test and its reference), in the order they were loaded.
  int64_t model = 0;
  cache::KvCacheSpec cache;  // the driver's cache: workers keep one of the same geometry
  int64_t tokens = 0;
  int64_t sequences = 0;
  int64_t logit_rows = 0;
  int64_t table_entries = 0;  // block-table entries over all sequences

  int64_t payload_bytes() const;
};
using WireHeader = std::array<int64_t, kHeaderWords>;

// The header of `batch` run through model `model` with `cache`.
StepHeader step_header(int64_t model, const cache::KvCacheSpec& cache,
                       const model::ForwardBatch& batch);
WireHeader encode_header(const StepHeader& header);
// Throws Error naming both versions when `wire` comes from another protocol.
StepHeader decode_header(const WireHeader& wire);

// The payload of `batch` (header.payload_bytes() bytes).
std::vector<std::byte> encode_payload(const StepHeader& header, const model::ForwardBatch& batch);

// A received step: the vectors its ForwardBatch points into.
struct ReceivedStep {
  std::vector<int32_t> tokens, positions, tables;
  model::ForwardBatch batch;
};
// Throws Error when the payload is inconsistent with the header.
void decode_payload(const StepHeader& header, std::span<const std::byte> bytes, ReceivedStep& step);

}  // namespace deepinfer::engine
