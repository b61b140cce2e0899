#include "engine/engine.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/stop_text.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {

struct Engine::SequenceText {
  SequenceText(const tokenizer::Tokenizer& tok, std::vector<std::string> stops)
      : detok(tok, /*skip_special_tokens=*/true), filter(std::move(stops)) {}
  tokenizer::StreamingDetokenizer detok;
  StopTextFilter filter;
};

struct Engine::Request {
  RequestId id = 0;
  SamplingParams params;
  int64_t priority = 0;
  uint64_t arrival = 0;
  uint64_t seed = 0;
  std::vector<int32_t> prompt;
  std::vector<std::unique_ptr<Sequence>> seqs;       // index order; siblings after the fork
  std::vector<std::unique_ptr<SequenceText>> texts;  // parallel to seqs; empty without tokenizer
  bool forked = false;
  int64_t num_finished = 0;
  std::vector<CompletionDelta> deltas;  // this step's progress, reported by step()
  bool reported_final = false;
  // params.prompt_logprobs: entry i for prompt token i + 1, filled chunk by chunk.
  std::vector<TokenLogprobs> prompt_logprobs;
  bool prompt_logprobs_reported = false;

  bool finished() const { return num_finished == params.n; }
  int64_t prompt_logprobs_wanted() const {
    return params.prompt_logprobs ? static_cast<int64_t>(prompt.size()) - 1 : 0;
  }
  bool prompt_logprobs_pending() const {
    return !prompt_logprobs_reported &&
           static_cast<int64_t>(prompt_logprobs.size()) < prompt_logprobs_wanted();
  }
};

namespace {

// Logits of prompt-logprob rows one step may hold: 256 MiB is ~440 rows of a 152k vocabulary.
constexpr int64_t kMaxScoredLogitBytes = int64_t{256} << 20;

// Resolves the pool size and max_model_len from the model and the user's settings.
EngineConfig resolve(const model::CausalLM& model, EngineConfig config) {
  DI_CHECK(config.block_size >= 1 && config.block_size <= 1024,
           "--block-size must be in [1, 1024], got ", config.block_size);
  DI_CHECK(config.max_num_blocks >= 0, "--max-num-blocks must be >= 0, got ",
           config.max_num_blocks);
  DI_CHECK(config.max_model_len >= 0, "--max-model-len must be >= 0, got ", config.max_model_len);
  const int64_t bytes_per_token =
      model::kv_cache_spec(model, config.block_size, 1, config.kv_cache_dtype).bytes_per_token();
  const int64_t model_max = model.config().max_position_embeddings;
  if (config.max_num_blocks == 0) {
    if (config.kv_cache_memory_gib > 0) {
      config.max_num_blocks = cache::BlockManager::blocks_for_memory(
          config.kv_cache_memory_gib, bytes_per_token, config.block_size);
      const int64_t len = config.max_model_len > 0 ? config.max_model_len : model_max;
      const int64_t usable =
          len > 0 ? config.max_num_seqs * ((len + config.block_size - 1) / config.block_size) : 0;
      if (usable > 0 && config.max_num_blocks > usable) {
        log::info("KV cache: --kv-cache-memory ", config.kv_cache_memory_gib, " GiB holds ",
                  config.max_num_blocks, " blocks, but ", config.max_num_seqs, " sequences (",
                  "max_num_seqs) of ", len, " tokens (",
                  config.max_model_len > 0 ? "max_model_len" : "max_position_embeddings",
                  ") use at most ", usable, ": capped at ", usable, " blocks");
        config.max_num_blocks = usable;
      }
    } else {
      const int64_t len = config.max_model_len > 0 ? config.max_model_len
                          : model_max > 0          ? std::min<int64_t>(model_max, 8192)
                                                   : 8192;
      const int64_t wanted =
          config.max_num_seqs * ((len + config.block_size - 1) / config.block_size);
      const int64_t cap = cache::BlockManager::blocks_for_memory(
          EngineConfig::kDefaultKvMemoryGib, bytes_per_token, config.block_size);
      config.max_num_blocks = std::min(wanted, cap);
    }
  }
  const int64_t pool_tokens = config.max_num_blocks * config.block_size;
  if (config.max_model_len == 0) {
    config.max_model_len = model_max > 0 ? std::min(model_max, pool_tokens) : pool_tokens;
  }
  DI_CHECK(config.max_model_len <= pool_tokens, "--max-model-len ", config.max_model_len,
           " does not fit in the KV cache (", config.max_num_blocks, " blocks of ",
           config.block_size, " = ", pool_tokens,
           " tokens): raise --max-num-blocks / --kv-cache-memory or lower --max-model-len");
  return config;
}

std::vector<cache::BlockManager> make_groups(const EngineConfig& config) {
  DI_CHECK(config.attention_groups >= 1, "engine: ", config.attention_groups, " attention groups");
  std::vector<cache::BlockManager> groups;
  groups.reserve(static_cast<size_t>(config.attention_groups));
  for (int64_t g = 0; g < config.attention_groups; ++g)
    groups.emplace_back(config.max_num_blocks, config.block_size, config.enable_prefix_caching);
  return groups;
}

std::vector<cache::BlockManager*> pointers(std::vector<cache::BlockManager>& groups) {
  std::vector<cache::BlockManager*> out;
  for (auto& g : groups) out.push_back(&g);
  return out;
}

}  // namespace

Engine::Engine(model::CausalLM& model, ThreadPool& pool, const EngineConfig& config,
               const tokenizer::Tokenizer* tokenizer)
    : model_(model),
      config_(resolve(model, config)),
      tokenizer_(tokenizer),
      cache_(model::kv_cache_spec(model, config_.block_size, config_.max_num_blocks,
                                  config_.kv_cache_dtype, config_.kv_huge_pages)),
      blocks_(make_groups(config_)),
      scheduler_({config_.max_num_seqs, config_.max_num_batched_tokens, config_.scheduling_policy},
                 pointers(blocks_)),
      seed_source_(config.seed ? *config.seed : std::random_device{}()),
      runner_(model, pool) {}

Engine::~Engine() = default;

std::vector<int32_t> Engine::encode(std::string_view prompt) const {
  DI_CHECK(tokenizer_ != nullptr,
           "a text prompt needs the model's tokenizer (tokenizer.json), which this engine was "
           "built without; give token ids instead");
  return tokenizer_->encode(prompt, /*add_special_tokens=*/true);
}

void Engine::check_request(std::span<const int32_t> prompt_ids,
                           const SamplingParams& params) const {
  const int64_t vocab = model_.vocab_size();
  params.validate(vocab);
  DI_CHECK(!prompt_ids.empty(), "the prompt is empty: give at least one token");
  for (int32_t id : prompt_ids) {
    DI_CHECK(id >= 0 && id < vocab, "prompt token id ", id, " is outside the vocabulary [0, ",
             vocab, ")");
  }
  const auto len = static_cast<int64_t>(prompt_ids.size());
  DI_CHECK(len <= config_.max_model_len, "the prompt has ", len,
           " tokens, more than max_model_len ", config_.max_model_len,
           ": shorten it or raise --max-model-len");
  const cache::BlockManager& pool = blocks_.front();  // every group's pool is this size
  DI_CHECK(pool.blocks_for_tokens(len) <= pool.num_blocks(), "the prompt has ", len,
           " tokens and needs more KV blocks than the whole pool (", pool.num_blocks(),
           "): shorten it or raise --max-num-blocks / --kv-cache-memory");
  DI_CHECK(params.stop.empty() || tokenizer_ != nullptr,
           "stop strings need the model's tokenizer, which this engine was built without");
}

RequestId Engine::add_request_text(std::string_view prompt, const SamplingParams& params,
                                   int64_t priority, std::optional<RequestId> id) {
  return add_request(encode(prompt), params, priority, id);
}

RequestId Engine::add_request(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                              int64_t priority, std::optional<RequestId> id) {
  check_request(prompt_ids, params);
  const RequestId rid = id.value_or(next_id_);
  DI_CHECK(!requests_.contains(rid), "request id ", rid, " is already in use");
  next_id_ = std::max(next_id_, rid + 1);

  auto req = std::make_unique<Request>();
  req->id = rid;
  req->params = params;
  req->priority = priority;
  req->arrival = next_arrival_++;
  req->seed = params.seed ? *params.seed : seed_source_();
  req->prompt = std::move(prompt_ids);

  auto seq = std::make_unique<Sequence>();
  seq->request = rid;
  seq->priority = priority;
  seq->arrival = req->arrival;
  seq->seed = sibling_seed(req->seed, 0);
  seq->tokens = req->prompt;
  seq->prompt_len = static_cast<int64_t>(req->prompt.size());
  Sequence& leader = *seq;
  req->seqs.push_back(std::move(seq));
  if (tokenizer_ != nullptr) {
    req->texts.push_back(std::make_unique<SequenceText>(*tokenizer_, params.stop));
  }
  Request& r = *req;
  requests_.emplace(rid, std::move(req));
  // Prompt logprobs need every position computed, so no prefix-cache hits for them, and
  // their chunks are capped so the logits of every row stay within kMaxScoredLogitBytes.
  leader.reads_prefix_cache = !r.prompt_logprobs_pending();
  if (r.prompt_logprobs_pending()) {
    leader.max_chunk_tokens = std::max<int64_t>(
        1, kMaxScoredLogitBytes / (static_cast<int64_t>(sizeof(float)) * model_.vocab_size()));
  }
  if (params.max_new_tokens == 0 && !r.prompt_logprobs_pending()) {
    // Nothing to generate or score: finished at once, reported by the next step().
    leader.status = SequenceStatus::finished;
    leader.finish_reason = FinishReason::length;
    finish_unforked(r, FinishReason::length, 0);
    return rid;
  }
  scheduler_.add(&leader);
  return rid;
}

void Engine::finish_unforked(Request& req, FinishReason reason, int64_t first_index) {
  req.forked = true;
  for (int64_t i = first_index; i < req.params.n; ++i) {
    req.deltas.push_back({});
    req.deltas.back().index = i;
    req.deltas.back().finish_reason = reason;
    ++req.num_finished;
  }
}

Engine::Request& Engine::request_of(const Sequence& seq) {
  return *requests_.at(seq.request);
}

CompletionDelta& Engine::delta_for(Request& req, const Sequence& seq) {
  for (auto& d : req.deltas) {
    if (d.index == seq.index) return d;
  }
  req.deltas.push_back({});
  req.deltas.back().index = seq.index;
  return req.deltas.back();
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs;
  if (scheduler_.num_waiting() + scheduler_.num_running() > 0) {
    const SchedulerOutput out = scheduler_.schedule();
    counters_.num_preemptions += out.num_preempted;
    if (!out.empty()) run_model(out);
  }
  collect_outputs(outputs);
  return outputs;
}

void Engine::run_model(const SchedulerOutput& out) {
  runner_.prepare(out);
  std::vector<int64_t> logit_rows;
  // Which logits row serves what: sampling a sequence's next token, or scoring prompt token
  // `position + 1` of a request asking for prompt logprobs.
  struct SampleRow {
    Sequence* seq;
    size_t row;
  };
  struct ScoreRow {
    Request* req;
    int64_t position;
    size_t row;
  };
  std::vector<SampleRow> sampled;  // sequences whose chunk reaches their last token
  std::vector<ScoreRow> scored;
  std::vector<Sequence*> prefilled;  // max_new_tokens = 0: prompt scored, nothing to sample
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    const ScheduledChunk& c = out.chunks[i];
    Sequence& seq = *c.seq;
    const int64_t begin = runner_.first_rows()[i];
    const int64_t first = seq.num_computed;
    const int64_t end = first + c.num_tokens;
    Request& req = request_of(seq);
    if (seq.index == 0 && req.prompt_logprobs_pending()) {
      // A recomputed prefix (after a preemption) is not scored twice.
      const int64_t from = std::max(first, static_cast<int64_t>(req.prompt_logprobs.size()));
      const int64_t to = std::min(end, req.prompt_logprobs_wanted());
      for (int64_t p = from; p < to; ++p) {
        scored.push_back({&req, p, logit_rows.size()});
        logit_rows.push_back(begin + p - first);
      }
    }
    if (end == seq.num_tokens()) {
      if (seq.num_output() == 0 && req.params.max_new_tokens == 0) {
        prefilled.push_back(&seq);
      } else {
        sampled.push_back({&seq, logit_rows.size()});
        logit_rows.push_back(begin + c.num_tokens - 1);
      }
    }
  }
  const std::span<float> logits = runner_.execute(std::move(logit_rows), cache_);
  const auto vocab = static_cast<size_t>(model_.vocab_size());
  ++counters_.steps;
  counters_.forward_tokens += out.num_tokens;
  scheduler_.commit(out);

  const auto row_of = [&](size_t row) { return logits.subspan(row * vocab, vocab); };
  for (const ScoreRow& s : scored) {
    Request& req = *s.req;
    DI_CHECK(static_cast<int64_t>(req.prompt_logprobs.size()) == s.position,
             "engine: prompt logprobs of request ", req.id, " scored out of order");
    const int32_t target = req.prompt[static_cast<size_t>(s.position + 1)];
    req.prompt_logprobs.push_back(
        token_logprobs(row_of(s.row), target, *req.params.prompt_logprobs));
    if (!req.prompt_logprobs_pending()) {
      req.seqs.front()->reads_prefix_cache = true;
      req.seqs.front()->max_chunk_tokens = 0;
    }
  }
  for (Sequence* seq : prefilled) {
    Request& req = request_of(*seq);
    finish_sequence(req, *seq, FinishReason::length);
    finish_unforked(req, FinishReason::length, 1);
  }
  for (const SampleRow& s : sampled) {
    Sequence& seq = *s.seq;
    Request& req = request_of(seq);
    SampleResult r =
        sample(row_of(s.row), req.params, {seq.prompt(), seq.output()}, seq.seed, seq.num_output());
    process_token(req, seq, r.token, req.params.logprobs ? &r.logprobs : nullptr);
  }
}

void Engine::process_token(Request& req, Sequence& seq, int32_t token, TokenLogprobs* logprobs) {
  seq.tokens.push_back(token);
  ++counters_.generated_tokens;
  CompletionDelta& delta = delta_for(req, seq);
  delta.token_ids.push_back(token);
  if (logprobs != nullptr) delta.logprobs.push_back(std::move(*logprobs));
  // The leader has just computed the whole prompt: its siblings can share it now.
  if (seq.index == 0 && !req.forked) fork_siblings(req);

  const auto& p = req.params;
  const auto listed = [token](const std::vector<int64_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  if ((!p.ignore_eos && listed(config_.eos_token_ids)) || listed(p.stop_token_ids)) {
    // The stop token stays in token_ids but adds no text (as in vLLM).
    finish_sequence(req, seq, FinishReason::stop);
    return;
  }
  if (!req.texts.empty()) {
    SequenceText& text = *req.texts[static_cast<size_t>(seq.index)];
    delta.text += text.filter.push(text.detok.push(token));
    if (text.filter.stopped()) {
      finish_sequence(req, seq, FinishReason::stop, text.filter.matched_stop());
      return;
    }
  }
  if (seq.num_output() >= p.max_new_tokens || seq.num_tokens() >= config_.max_model_len) {
    finish_sequence(req, seq, FinishReason::length);
  }
}

void Engine::finish_sequence(Request& req, Sequence& seq, FinishReason reason, std::string stop) {
  CompletionDelta& delta = delta_for(req, seq);
  if (!req.texts.empty() && reason != FinishReason::abort) {
    SequenceText& text = *req.texts[static_cast<size_t>(seq.index)];
    if (!text.filter.stopped()) {
      delta.text += text.filter.push(text.detok.flush());
      if (text.filter.stopped()) {
        reason = FinishReason::stop;
        stop = text.filter.matched_stop();
      }
      delta.text += text.filter.finish();
    }
  }
  scheduler_.remove(&seq, reason);
  delta.finish_reason = reason;
  delta.stop = std::move(stop);
  ++req.num_finished;
}

void Engine::fork_siblings(Request& req) {
  req.forked = true;
  Sequence& leader = *req.seqs.front();
  // Full prompt blocks are shared; the tail block (holding at least the last prompt token,
  // whose logits each sibling needs) is recomputed by each sibling, which costs fewer than
  // block_size tokens and needs no copy-on-write.
  const auto shared =
      static_cast<size_t>(std::min<int64_t>((leader.prompt_len - 1) / config_.block_size,
                                            static_cast<int64_t>(leader.block_table.size())));
  for (int64_t i = 1; i < req.params.n; ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->request = req.id;
    seq->index = i;
    seq->priority = req.priority;
    seq->arrival = req.arrival;
    seq->seed = sibling_seed(req.seed, i);
    seq->tokens = req.prompt;
    seq->prompt_len = leader.prompt_len;
    seq->block_table.assign(leader.block_table.begin(),
                            leader.block_table.begin() + static_cast<std::ptrdiff_t>(shared));
    seq->attention_group = leader.attention_group;  // its blocks are in the leader's pool
    blocks_[static_cast<size_t>(leader.attention_group)].share(seq->block_table);
    seq->num_computed = static_cast<int64_t>(shared) * config_.block_size;
    seq->num_cached_tokens = seq->num_computed;
    scheduler_.add(seq.get());
    req.seqs.push_back(std::move(seq));
    if (tokenizer_ != nullptr) {
      req.texts.push_back(std::make_unique<SequenceText>(*tokenizer_, req.params.stop));
    }
  }
}

bool Engine::abort(RequestId id) {
  const auto it = requests_.find(id);
  if (it == requests_.end() || it->second->finished()) return false;
  Request& req = *it->second;
  for (auto& seq : req.seqs) {
    if (!seq->finished()) finish_sequence(req, *seq, FinishReason::abort);
  }
  // Siblings never created: report them aborted too.
  if (!req.forked) finish_unforked(req, FinishReason::abort, 1);
  return true;
}

void Engine::collect_outputs(std::vector<RequestOutput>& outputs) {
  for (auto it = requests_.begin(); it != requests_.end();) {
    Request& req = *it->second;
    const bool finished = req.finished();
    if (!req.deltas.empty() || finished) {
      RequestOutput out;
      out.id = req.id;
      out.completions = std::move(req.deltas);
      std::sort(out.completions.begin(), out.completions.end(),
                [](const auto& a, const auto& b) { return a.index < b.index; });
      out.finished = finished;
      out.num_prompt_tokens = static_cast<int64_t>(req.prompt.size());
      out.num_cached_tokens = req.seqs.front()->num_cached_tokens;
      if (req.params.prompt_logprobs && !req.prompt_logprobs_pending() &&
          !req.prompt_logprobs_reported) {
        out.prompt_logprobs = std::move(req.prompt_logprobs);
        req.prompt_logprobs_reported = true;
      }
      outputs.push_back(std::move(out));
      req.deltas.clear();
    }
    it = finished ? requests_.erase(it) : std::next(it);
  }
}

EngineStats Engine::stats() const {
  EngineStats s = counters_;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  s.unfinished_requests = static_cast<int64_t>(requests_.size());
  s.blocks = blocks_.front().stats();
  for (size_t g = 1; g < blocks_.size(); ++g) {  // every group's pool, summed
    const cache::BlockManagerStats more = blocks_[g].stats();
    s.blocks.num_blocks += more.num_blocks;
    s.blocks.free_blocks += more.free_blocks;
    s.blocks.cached_blocks += more.cached_blocks;
    s.blocks.peak_used_blocks += more.peak_used_blocks;
    s.blocks.prefix_query_tokens += more.prefix_query_tokens;
    s.blocks.prefix_hit_tokens += more.prefix_hit_tokens;
    s.blocks.evictions += more.evictions;
  }
  if (const auto eplb = model_.eplb_state()) s.moe = eplb->summary();
  return s;
}

std::vector<RequestResult> Engine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                            const std::vector<SamplingParams>& params) {
  DI_CHECK(params.size() == 1 || params.size() == prompts.size(),
           "generate: give one SamplingParams for all prompts or one per prompt");
  DI_CHECK(!has_unfinished(), "generate: the engine already has requests in flight");
  std::vector<RequestResult> results(prompts.size());
  std::map<RequestId, size_t> slot;
  try {
    for (size_t i = 0; i < prompts.size(); ++i) {
      const SamplingParams& p = params[params.size() == 1 ? 0 : i];
      const RequestId id = add_request(prompts[i], p);
      slot[id] = i;
      results[i].id = id;
      results[i].prompt_ids = prompts[i];
      results[i].completions.resize(static_cast<size_t>(p.n));
    }
  } catch (...) {
    for (const auto& [id, i] : slot) abort(id);
    step();  // drop the aborted requests
    throw;
  }
  while (has_unfinished()) {
    for (const RequestOutput& out : step()) {
      RequestResult& r = results[slot.at(out.id)];
      r.num_cached_tokens = out.num_cached_tokens;
      if (!out.prompt_logprobs.empty()) r.prompt_logprobs = out.prompt_logprobs;
      for (const CompletionDelta& d : out.completions) {
        accumulate(r.completions[static_cast<size_t>(d.index)], d);
      }
    }
  }
  return results;
}

void accumulate(Completion& into, const CompletionDelta& delta) {
  into.token_ids.insert(into.token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  into.text += delta.text;
  into.logprobs.insert(into.logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
  if (delta.finish_reason != FinishReason::none) {
    into.finish_reason = delta.finish_reason;
    into.stop = delta.stop;
  }
}

}  // namespace deepinfer::engine
