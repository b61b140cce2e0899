#include "engine/lockstep.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/error.h"
#include "engine/attention_groups.h"

namespace deepinfer::engine {
namespace {

// One step on the wire: a fixed header of int64 (broadcast with the idle wait), then one
// payload whose size the header implies: int64 [begin, count, table length, attention group]
// per sequence and the logit rows, then int32 tokens, positions and the block tables,
// concatenated.
enum Field : size_t {
  kKind,
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
  kFields
};
using Header = std::array<int64_t, kFields>;
constexpr int64_t kStop = 0;
constexpr int64_t kStep = 1;
// Versioned kind: a worker built from other sources refuses rather than misreads.
constexpr int64_t kProtocol = 0x4450'0002;  // "DP" v2: attention groups
constexpr size_t kWidePerSequence = 4;      // int64 fields per sequence

int64_t payload_bytes(const Header& h) {
  const int64_t wide = static_cast<int64_t>(kWidePerSequence) * h[kSequences] + h[kLogitRows];
  const int64_t narrow = 2 * h[kTokens] + h[kTableEntries];
  return wide * static_cast<int64_t>(sizeof(int64_t)) +
         narrow * static_cast<int64_t>(sizeof(int32_t));
}

void broadcast_header(parallel::Communicator& world, Header& header) {
  std::array<int64_t, kFields + 1> wire{};
  wire[0] = kProtocol;
  std::copy(header.begin(), header.end(), wire.begin() + 1);
  world.broadcast_bytes_idle(std::as_writable_bytes(std::span(wire)), 0);
  DI_CHECK(wire[0] == kProtocol,
           "lockstep: rank 0 speaks another step protocol (mismatched deepinfer binaries "
           "between ranks)");
  std::copy(wire.begin() + 1, wire.end(), header.begin());
}

cache::KvCacheSpec spec_of(const Header& h) {
  cache::KvCacheSpec spec;
  spec.num_layers = h[kLayers];
  spec.kv_heads = h[kKvHeads];
  spec.head_dim = h[kHeadDim];
  spec.v_head_dim = h[kVHeadDim];
  spec.block_size = h[kBlockSize];
  spec.num_blocks = h[kNumBlocks];
  spec.dtype = static_cast<DType>(h[kDType]);
  spec.quant_group = h[kQuantGroup];
  return spec;
}

bool same_geometry(const cache::KvCacheSpec& a, const cache::KvCacheSpec& b) {
  return a.num_layers == b.num_layers && a.kv_heads == b.kv_heads && a.head_dim == b.head_dim &&
         a.v_head_dim == b.v_head_dim && a.block_size == b.block_size &&
         a.num_blocks == b.num_blocks && a.dtype == b.dtype && a.quant_group == b.quant_group;
}

// Reads a payload into vectors a ForwardBatch can point at.
struct ReceivedStep {
  std::vector<int32_t> tokens, positions, tables;
  model::ForwardBatch batch;
};

void unpack(const Header& h, const std::vector<std::byte>& bytes, ReceivedStep& step) {
  const auto sequences = static_cast<size_t>(h[kSequences]);
  std::vector<int64_t> wide(kWidePerSequence * sequences + static_cast<size_t>(h[kLogitRows]));
  std::memcpy(wide.data(), bytes.data(), wide.size() * sizeof(int64_t));
  const std::byte* narrow = bytes.data() + wide.size() * sizeof(int64_t);
  const auto take = [&](std::vector<int32_t>& into, int64_t count) {
    into.resize(static_cast<size_t>(count));
    std::memcpy(into.data(), narrow, into.size() * sizeof(int32_t));
    narrow += into.size() * sizeof(int32_t);
  };
  take(step.tokens, h[kTokens]);
  take(step.positions, h[kTokens]);
  take(step.tables, h[kTableEntries]);
  step.batch = {};
  step.batch.tokens = step.tokens;
  step.batch.positions = step.positions;
  int64_t table_at = 0;
  for (size_t s = 0; s < sequences; ++s) {
    const int64_t* fields = wide.data() + kWidePerSequence * s;
    const int64_t length = fields[2];
    DI_CHECK(length >= 0 && table_at + length <= h[kTableEntries],
             "lockstep: block table of sequence ", s, " outside the step's tables");
    step.batch.sequences.push_back(
        {fields[0], fields[1],
         std::span<const int32_t>(step.tables)
             .subspan(static_cast<size_t>(table_at), static_cast<size_t>(length)),
         fields[3]});
    table_at += length;
  }
  step.batch.logit_rows.assign(
      wide.begin() + static_cast<std::ptrdiff_t>(kWidePerSequence * sequences), wide.end());
}

// One step on this rank: the whole batch, or with attention data parallelism only this rank's
// attention group of it (attention_groups.h).
void run_step(model::CausalLM& model, const model::ForwardBatch& batch, cache::KvCache& cache,
              float* logits, ThreadPool& pool, const parallel::ParallelContext* layout) {
  if (layout != nullptr && layout->attention_data_parallel()) {
    run_attention_groups(model, batch, cache, logits, pool, *layout);
  } else {
    model.forward(batch, cache, logits, pool);
  }
}

}  // namespace

LockstepModel::LockstepModel(std::unique_ptr<model::CausalLM> model,
                             std::shared_ptr<parallel::Communicator> world,
                             std::shared_ptr<const parallel::ParallelContext> layout)
    : model_(std::move(model)), world_(std::move(world)), layout_(std::move(layout)) {
  DI_CHECK(model_ != nullptr && world_ != nullptr, "LockstepModel: no model or communicator");
  DI_CHECK(world_->rank() == 0, "LockstepModel runs on rank 0; rank ", world_->rank(),
           " runs run_lockstep_worker");
}

LockstepModel::~LockstepModel() {
  try {
    stop();
  } catch (...) {
    // A destructor must not throw; a broken transport ends the job anyway.
  }
}

void LockstepModel::stop() {
  if (stopped_) return;
  stopped_ = true;
  Header header{};
  header[kKind] = kStop;
  broadcast_header(*world_, header);
}

void LockstepModel::forward(const model::ForwardBatch& batch, cache::KvCache& cache, float* logits,
                            ThreadPool& pool) {
  DI_CHECK(!stopped_, "LockstepModel: forward after the workers were stopped");
  const cache::KvCacheSpec& spec = cache.spec();
  Header h{};
  h[kKind] = kStep;
  h[kLayers] = spec.num_layers;
  h[kKvHeads] = spec.kv_heads;
  h[kHeadDim] = spec.head_dim;
  h[kVHeadDim] = spec.v_head_dim;
  h[kBlockSize] = spec.block_size;
  h[kNumBlocks] = spec.num_blocks;
  h[kDType] = static_cast<int64_t>(spec.dtype);
  h[kQuantGroup] = spec.quant_group;
  h[kTokens] = static_cast<int64_t>(batch.tokens.size());
  h[kSequences] = static_cast<int64_t>(batch.sequences.size());
  h[kLogitRows] = static_cast<int64_t>(batch.logit_rows.size());
  DI_CHECK(batch.positions.size() == batch.tokens.size(), "lockstep: ", batch.tokens.size(),
           " tokens but ", batch.positions.size(), " positions");
  for (const auto& s : batch.sequences)
    h[kTableEntries] += static_cast<int64_t>(s.block_table.size());

  std::vector<std::byte> bytes(static_cast<size_t>(payload_bytes(h)));
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

  broadcast_header(*world_, h);
  world_->broadcast_bytes(bytes, 0);
  run_step(*model_, batch, cache, logits, pool, layout_.get());
}

int64_t run_lockstep_worker(model::CausalLM& model, parallel::Communicator& world, ThreadPool& pool,
                            const parallel::ParallelContext* layout) {
  DI_CHECK(world.rank() != 0, "run_lockstep_worker runs on ranks > 0; rank 0 drives");
  std::unique_ptr<cache::KvCache> cache;
  std::vector<float> logits;
  std::vector<std::byte> bytes;
  ReceivedStep step;
  const auto vocab = static_cast<size_t>(model.vocab_size());
  int64_t steps = 0;
  for (;;) {
    Header h{};
    broadcast_header(world, h);
    if (h[kKind] == kStop) return steps;
    DI_CHECK(h[kKind] == kStep, "lockstep: unknown message kind ", h[kKind], " from rank 0");
    bytes.resize(static_cast<size_t>(payload_bytes(h)));
    world.broadcast_bytes(bytes, 0);
    unpack(h, bytes, step);
    // Rank 0 made a new cache (another engine, another greedy run): make the same. Stale
    // contents never matter: rank 0 reads only what its steps wrote, and so does this rank.
    cache::KvCacheSpec spec = spec_of(h);
    // A pipeline stage's cache holds its own layers, not rank 0's.
    spec.num_layers = model.kv_layout().num_layers;
    if (!cache || !same_geometry(cache->spec(), spec)) {
      cache.reset();
      cache = std::make_unique<cache::KvCache>(spec);
    }
    logits.resize(step.batch.logit_rows.size() * vocab);
    run_step(model, step.batch, *cache, logits.data(), pool, layout);
    ++steps;
  }
}

}  // namespace deepinfer::engine
