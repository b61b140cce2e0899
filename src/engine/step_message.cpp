#include "engine/step_message.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace deepinfer::engine {
namespace {

// Word positions in the wire header (word 0: magic | version).
enum Word : size_t {
  kVersionWord,
  kKind,
  kModel,
  kLayers,
  kKvHeads,
  kHeadDim,
  kVHeadDim,
  kBlockSize,
  kNumBlocks,
  kDType,
  kQuantGroup,
  kTokens,
  kSequences,
  kLogitRows,
  kTableEntries,
  kUsedWords
};
static_assert(kUsedWords <= kHeaderWords, "the step header outgrew its fixed size");

}  // namespace

int64_t StepHeader::payload_bytes() const {
  const int64_t wide = kWidePerSequence * sequences + logit_rows;
  const int64_t narrow = 2 * tokens + table_entries;
  return wide * static_cast<int64_t>(sizeof(int64_t)) +
         narrow * static_cast<int64_t>(sizeof(int32_t));
}

StepHeader step_header(int64_t model, const cache::KvCacheSpec& cache,
                       const model::ForwardBatch& batch) {
  DI_CHECK(batch.positions.size() == batch.tokens.size(), "lockstep: ", batch.tokens.size(),
           " tokens but ", batch.positions.size(), " positions");
  StepHeader h;
  h.kind = StepKind::step;
  h.model = model;
  h.cache = cache;
  h.tokens = static_cast<int64_t>(batch.tokens.size());
  h.sequences = static_cast<int64_t>(batch.sequences.size());
  h.logit_rows = static_cast<int64_t>(batch.logit_rows.size());
  for (const auto& s : batch.sequences)
    h.table_entries += static_cast<int64_t>(s.block_table.size());
  return h;
}

WireHeader encode_header(const StepHeader& h) {
  WireHeader w{};
  w[kVersionWord] = kWireMagic | kWireVersion;
  w[kKind] = static_cast<int64_t>(h.kind);
  w[kModel] = h.model;
  w[kLayers] = h.cache.num_layers;
  w[kKvHeads] = h.cache.kv_heads;
  w[kHeadDim] = h.cache.head_dim;
  w[kVHeadDim] = h.cache.v_head_dim;
  w[kBlockSize] = h.cache.block_size;
  w[kNumBlocks] = h.cache.num_blocks;
  w[kDType] = static_cast<int64_t>(h.cache.dtype);
  w[kQuantGroup] = h.cache.quant_group;
  w[kTokens] = h.tokens;
  w[kSequences] = h.sequences;
  w[kLogitRows] = h.logit_rows;
  w[kTableEntries] = h.table_entries;
  return w;
}

StepHeader decode_header(const WireHeader& w) {
  const int64_t version = w[kVersionWord];
  DI_CHECK(version == (kWireMagic | kWireVersion), "lockstep: rank 0 speaks step protocol ",
           (version & ~int64_t{0xffff}) == kWireMagic ? str_cat("v", version & 0xffff)
                                                      : std::string("(unknown)"),
           ", this rank v", kWireVersion, " (mismatched deepinfer binaries between ranks)");
  StepHeader h;
  h.kind = static_cast<StepKind>(w[kKind]);
  DI_CHECK(h.kind == StepKind::stop || h.kind == StepKind::step, "lockstep: unknown message kind ",
           w[kKind], " from rank 0");
  h.model = w[kModel];
  h.cache.num_layers = w[kLayers];
  h.cache.kv_heads = w[kKvHeads];
  h.cache.head_dim = w[kHeadDim];
  h.cache.v_head_dim = w[kVHeadDim];
  h.cache.block_size = w[kBlockSize];
  h.cache.num_blocks = w[kNumBlocks];
  h.cache.dtype = static_cast<DType>(w[kDType]);
  h.cache.quant_group = w[kQuantGroup];
  h.tokens = w[kTokens];
  h.sequences = w[kSequences];
  h.logit_rows = w[kLogitRows];
  h.table_entries = w[kTableEntries];
  DI_CHECK(h.tokens >= 0 && h.sequences >= 0 && h.logit_rows >= 0 && h.table_entries >= 0,
           "lockstep: negative sizes in a step header from rank 0");
  return h;
}

std::vector<std::byte> encode_payload(const StepHeader& h, const model::ForwardBatch& batch) {
  std::vector<std::byte> bytes(static_cast<size_t>(h.payload_bytes()));
  std::byte* at = bytes.data();
  const auto put = [&](const void* data, size_t size) {
    if (size > 0) std::memcpy(at, data, size);
    at += size;
  };
  for (const auto& s : batch.sequences) {
    const std::array<int64_t, kWidePerSequence> wide = {
        s.begin, s.count, static_cast<int64_t>(s.block_table.size()), s.attention_group};
    put(wide.data(), sizeof(wide));
  }
  put(batch.logit_rows.data(), batch.logit_rows.size() * sizeof(int64_t));
  put(batch.tokens.data(), batch.tokens.size_bytes());
  put(batch.positions.data(), batch.positions.size_bytes());
  for (const auto& s : batch.sequences) put(s.block_table.data(), s.block_table.size_bytes());
  return bytes;
}

void decode_payload(const StepHeader& h, std::span<const std::byte> bytes, ReceivedStep& step) {
  DI_CHECK(static_cast<int64_t>(bytes.size()) == h.payload_bytes(), "lockstep: a step payload of ",
           bytes.size(), " bytes where the header says ", h.payload_bytes());
  const auto sequences = static_cast<size_t>(h.sequences);
  std::vector<int64_t> wide(kWidePerSequence * sequences + static_cast<size_t>(h.logit_rows));
  if (!wide.empty()) std::memcpy(wide.data(), bytes.data(), wide.size() * sizeof(int64_t));
  const std::byte* narrow = bytes.data() + wide.size() * sizeof(int64_t);
  const auto take = [&](std::vector<int32_t>& into, int64_t count) {
    into.resize(static_cast<size_t>(count));
    if (!into.empty()) std::memcpy(into.data(), narrow, into.size() * sizeof(int32_t));
    narrow += into.size() * sizeof(int32_t);
  };
  take(step.tokens, h.tokens);
  take(step.positions, h.tokens);
  take(step.tables, h.table_entries);
  step.batch = {};
  step.batch.tokens = step.tokens;
  step.batch.positions = step.positions;
  int64_t table_at = 0;
  for (size_t s = 0; s < sequences; ++s) {
    const int64_t* fields = wide.data() + kWidePerSequence * s;
    const int64_t begin = fields[0], count = fields[1], length = fields[2];
    DI_CHECK(length >= 0 && table_at + length <= h.table_entries,
             "lockstep: block table of sequence ", s, " outside the step's tables");
    DI_CHECK(begin >= 0 && count >= 0 && begin + count <= h.tokens, "lockstep: sequence ", s,
             " has rows [", begin, ", ", begin + count, ") outside the step's ", h.tokens,
             " tokens");
    step.batch.sequences.push_back(
        {begin, count,
         std::span<const int32_t>(step.tables)
             .subspan(static_cast<size_t>(table_at), static_cast<size_t>(length)),
         fields[3]});
    table_at += length;
  }
  step.batch.logit_rows.assign(
      wide.begin() + static_cast<std::ptrdiff_t>(kWidePerSequence * sequences), wide.end());
  for (int64_t row : step.batch.logit_rows) {
    DI_CHECK(row >= 0 && row < h.tokens, "lockstep: logit row ", row, " outside the step's ",
             h.tokens, " tokens");
  }
}

}  // namespace deepinfer::engine
