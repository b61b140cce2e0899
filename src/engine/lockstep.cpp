#include "engine/lockstep.h"

#include <cstring>

#include "core/error.h"
#include "engine/attention_groups.h"
#include "engine/step_message.h"

namespace deepinfer::engine {
namespace {

void broadcast_header(parallel::Communicator& world, StepHeader& header) {
  WireHeader wire = encode_header(header);
  world.broadcast_bytes_idle(std::as_writable_bytes(std::span(wire)), 0);
  header = decode_header(wire);
}

bool same_geometry(const cache::KvCacheSpec& a, const cache::KvCacheSpec& b) {
  return a.num_layers == b.num_layers && a.kv_heads == b.kv_heads && a.head_dim == b.head_dim &&
         a.v_head_dim == b.v_head_dim && a.block_size == b.block_size &&
         a.num_blocks == b.num_blocks && a.dtype == b.dtype && a.quant_group == b.quant_group &&
         a.index_dim == b.index_dim && a.index_layers == b.index_layers;
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
                             std::shared_ptr<const parallel::ParallelContext> layout, int64_t index)
    : model_(std::move(model)),
      world_(std::move(world)),
      layout_(std::move(layout)),
      index_(index) {
  DI_CHECK(model_ != nullptr && world_ != nullptr, "LockstepModel: no model or communicator");
  DI_CHECK(world_->rank() == 0, "LockstepModel runs on rank 0; rank ", world_->rank(),
           " runs run_lockstep_worker");
  DI_CHECK(index_ >= 0, "LockstepModel: negative model index ", index_);
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
  StepHeader header;
  header.kind = StepKind::stop;
  header.model = index_;
  broadcast_header(*world_, header);
}

void LockstepModel::forward(const model::ForwardBatch& batch, cache::KvCache& cache, float* logits,
                            ThreadPool& pool) {
  DI_CHECK(!stopped_, "LockstepModel: forward after the workers were stopped");
  StepHeader header = step_header(index_, cache.spec(), batch);
  std::vector<std::byte> bytes = encode_payload(header, batch);
  broadcast_header(*world_, header);
  world_->broadcast_bytes(bytes, 0);
  run_step(*model_, batch, cache, logits, pool, layout_.get());
}

int64_t run_lockstep_worker(std::span<model::CausalLM* const> models, parallel::Communicator& world,
                            ThreadPool& pool, const parallel::ParallelContext* layout) {
  DI_CHECK(world.rank() != 0, "run_lockstep_worker runs on ranks > 0; rank 0 drives");
  DI_CHECK(!models.empty(), "run_lockstep_worker: no model to follow");
  // Per model: its KV cache (made to rank 0's geometry) and whether rank 0 stopped it.
  std::vector<std::unique_ptr<cache::KvCache>> caches(models.size());
  std::vector<bool> stopped(models.size(), false);
  size_t running = models.size();
  std::vector<float> logits;
  std::vector<std::byte> bytes;
  ReceivedStep step;
  int64_t steps = 0;
  while (running > 0) {
    StepHeader h;
    broadcast_header(world, h);
    DI_CHECK(h.model >= 0 && h.model < static_cast<int64_t>(models.size()), "lockstep: rank 0 ",
             "runs model ", h.model, " but this rank loaded ", models.size(),
             " (ranks run different commands?)");
    const auto m = static_cast<size_t>(h.model);
    if (h.kind == StepKind::stop) {
      if (!stopped[m]) --running;
      stopped[m] = true;
      caches[m].reset();
      continue;
    }
    DI_CHECK(!stopped[m], "lockstep: rank 0 runs model ", m, " after stopping it");
    bytes.resize(static_cast<size_t>(h.payload_bytes()));
    world.broadcast_bytes(bytes, 0);
    decode_payload(h, bytes, step);
    // Rank 0 made a new cache (another engine, another greedy run): make the same. Stale
    // contents never matter: rank 0 reads only what its steps wrote, and so does this rank.
    cache::KvCacheSpec spec = h.cache;
    // A pipeline stage's cache holds its own layers, not rank 0's.
    const model::KvLayout model_layout = models[m]->kv_layout();
    spec.num_layers = model_layout.num_layers;
    spec.index_dim = model_layout.index_dim;
    spec.index_layers = model_layout.index_layers;
    if (!caches[m] || !same_geometry(caches[m]->spec(), spec)) {
      caches[m].reset();
      caches[m] = std::make_unique<cache::KvCache>(spec);
    }
    logits.resize(step.batch.logit_rows.size() * static_cast<size_t>(models[m]->vocab_size()));
    run_step(*models[m], step.batch, *caches[m], logits.data(), pool, layout);
    ++steps;
  }
  return steps;
}

int64_t run_lockstep_worker(model::CausalLM& model, parallel::Communicator& world, ThreadPool& pool,
                            const parallel::ParallelContext* layout) {
  model::CausalLM* const models[] = {&model};
  return run_lockstep_worker(std::span<model::CausalLM* const>(models), world, pool, layout);
}

}  // namespace deepinfer::engine
