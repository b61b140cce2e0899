#include "cli/bench/online.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/wait.h>

#include "cli/bench/in_process_server.h"
#include "cli/bench/server_process.h"
#include "cli/engine_flags.h"
#include "config/apply.h"
#include "config/setup.h"
#include "core/error.h"
#include "core/log.h"
#include "io/gguf_model.h"
#include "parallel/mpi_communicator.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The message of an OpenAI-style error body ({"error": {"message": ...}}), else the body.
std::string error_message(const std::string& body) {
  try {
    const auto j = nlohmann::json::parse(body);
    if (j.contains("error") && j["error"].is_object() && j["error"].contains("message")) {
      return j["error"]["message"].get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
  }
  return body.substr(0, 300);
}

std::string failure_kind(const std::string& message) {
  if (message.find("timed out") != std::string::npos) return "timeout";
  if (message.rfind("connect to", 0) == 0) return "connect";
  return "stream";
}

// `t0`: when the dispatcher sent it off (in order: sent_s never decreases with the index).
void send_one(const OnlineTarget& target, const BenchRequest& request, clock_type::time_point start,
              clock_type::time_point t0, RequestRecord& rec, double& finished_s) {
  rec.sent_s = ms_between(start, t0) / 1e3;
  auto end = t0;
  try {
    http::Connection conn =
        http::Connection::open(target.url.host, target.url.port, std::min(10.0, target.timeout_s));
    conn.set_timeout(target.timeout_s);
    nlohmann::json body = {{"model", target.model}, {"max_tokens", request.output_len},
                           {"temperature", 0},      {"ignore_eos", true},
                           {"stream", true},        {"stream_options", {{"include_usage", true}}}};
    if (request.prompt.empty()) {
      body["prompt"] = request.prompt_ids;
    } else {
      body["prompt"] = request.prompt;
    }
    http::HeaderList headers;
    if (!target.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + target.api_key);
    conn.send(http::format_request("POST", "/v1/completions", target.url, body.dump(), headers));
    http::ResponseReader response(conn);
    rec.http_status = response.head().status;
    if (rec.http_status != 200) {
      const std::string text = response.read_all();
      rec.reason = str_cat("http_", rec.http_status);
      rec.error = str_cat("HTTP ", rec.http_status, ": ", error_message(text));
      finished_s = ms_between(start, clock_type::now()) / 1e3;
      return;
    }
    http::SseParser sse;
    std::string piece;
    bool done = false;
    int64_t content_chunks = 0;
    std::optional<int64_t> prompt_tokens, completion_tokens;
    auto last = t0;
    while (!done && response.read_some(piece)) {
      for (const auto& event : sse.feed(piece)) {
        const auto now = clock_type::now();
        if (event.data == "[DONE]") {
          done = true;
          end = now;
          break;
        }
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(event.data);
        } catch (const nlohmann::json::exception&) {
          fail("malformed stream event: ", event.data.substr(0, 200));
        }
        if (j.contains("error")) {
          rec.reason = "stream_error";
          rec.error = j["error"].is_object() && j["error"].contains("message")
                          ? j["error"]["message"].get<std::string>()
                          : j["error"].dump();
          finished_s = ms_between(start, now) / 1e3;
          return;
        }
        const auto choices = j.find("choices");
        if (choices != j.end() && choices->is_array() && !choices->empty()) {
          const auto text = choices->front().find("text");
          if (text != choices->front().end() && text->is_string() &&
              !text->get<std::string>().empty()) {
            if (content_chunks == 0) {
              rec.ttft_ms = ms_between(t0, now);
            } else {
              rec.itl_ms.push_back(ms_between(last, now));
            }
            last = now;
            ++content_chunks;
          }
        }
        const auto usage = j.find("usage");
        if (usage != j.end() && usage->is_object()) {
          prompt_tokens = usage->value("prompt_tokens", int64_t{0});
          completion_tokens = usage->value("completion_tokens", int64_t{0});
        }
      }
    }
    if (!done) {
      rec.reason = "stream";
      rec.error = "the stream ended before data: [DONE]";
      finished_s = ms_between(start, clock_type::now()) / 1e3;
      return;
    }
    rec.completed = true;
    rec.e2e_ms = ms_between(t0, end);
    if (content_chunks == 0) rec.ttft_ms = rec.e2e_ms;
    rec.prompt_tokens = prompt_tokens.value_or(static_cast<int64_t>(request.prompt_ids.size()));
    rec.output_tokens = completion_tokens.value_or(content_chunks);
    finished_s = ms_between(start, end) / 1e3;
  } catch (const std::exception& e) {  // Error, or a JSON value of the wrong type
    rec.completed = false;
    rec.reason = failure_kind(e.what());
    rec.error = e.what();
    finished_s = ms_between(start, clock_type::now()) / 1e3;
  }
}

// Polls /metrics while a run goes on: the KV cache's peak usage (the gauge vLLM and deepinfer
// both name *kv_cache_usage_perc) and, from deepinfer's kv_cache_total_blocks, the pool size
// (peak blocks used = peak usage x pool).
class MetricsSampler {
 public:
  explicit MetricsSampler(http::Url url) : url_(std::move(url)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~MetricsSampler() { finish(); }
  void finish() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  std::optional<double> peak_usage() const { return peak_; }
  std::optional<double> total_blocks() const { return total_blocks_; }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      lock.unlock();
      sample();
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
    }
    lock.unlock();
    sample();  // the end state too
  }
  void sample() {
    try {
      const auto r = http::fetch(url_, "GET", "/metrics", "", 5);
      if (r.head.status != 200) return;
      size_t pos = 0;
      while (pos < r.body.size()) {
        const size_t eol = std::min(r.body.find('\n', pos), r.body.size());
        const std::string line = r.body.substr(pos, eol - pos);
        pos = eol + 1;
        if (line.empty() || line[0] == '#') continue;
        const std::string name = line.substr(0, line.find_first_of("{ "));
        const double value = std::atof(line.c_str() + line.rfind(' ') + 1);
        const auto ends_with = [&](std::string_view suffix) {
          return name.size() >= suffix.size() &&
                 name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
        };
        if (ends_with("kv_cache_usage_perc")) peak_ = std::max(peak_.value_or(0.0), value);
        if (ends_with("kv_cache_total_blocks")) total_blocks_ = value;
      }
    } catch (const Error&) {
      // a server without /metrics, or a busy one: the peak stays what was seen
    }
  }
  http::Url url_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<double> peak_;
  std::optional<double> total_blocks_;
  std::thread thread_;
};

std::string first_model_id(const http::Url& url, const std::string& api_key) {
  std::optional<http::Connection> opened;
  try {
    opened.emplace(http::Connection::open(url.host, url.port, 10));
  } catch (const Error& e) {
    fail("--base-url: ", e.what(), " (is the server running?)");
  }
  http::Connection& conn = *opened;
  http::HeaderList headers = {{"Connection", "close"}};
  if (!api_key.empty()) headers.emplace_back("Authorization", "Bearer " + api_key);
  conn.send(http::format_request("GET", "/v1/models", url, "", headers));
  http::ResponseReader response(conn);
  const std::string body = response.read_all();
  DI_CHECK(response.head().status == 200, "GET /v1/models: HTTP ", response.head().status, ": ",
           error_message(body), " (give --served-model-name)");
  try {
    const auto j = nlohmann::json::parse(body);
    return j.at("data").at(0).at("id").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    fail("GET /v1/models: no model id in the answer (give --served-model-name)");
  }
}

// The flags `deepinfer bench` passes on to the server it starts.
std::vector<std::string> server_args(const Args& args) {
  std::vector<std::string> out;
  if (const auto config = args.get("config")) {
    out = {"run", "--config", *config, "--mode", "api"};
    if (const auto model = args.get("model")) out.insert(out.end(), {"--model", *model});
  } else {
    out = {"serve", "--model", args.require("model")};
  }
  out.insert(out.end(), {"--host", "127.0.0.1", "--port", "0"});
  std::set<std::string> values =
      with_engine_value_flags({"threads", "dtype", "matmul-precision", "served-model-name",
                               "max-waiting-requests", "http-threads", "api-key", "log-level"});
  for (const auto& flag : values) {
    if (const auto v = args.get(flag)) out.insert(out.end(), {"--" + flag, *v});
  }
  for (const auto& flag : with_engine_bool_flags({})) {
    if (args.flag(flag)) out.push_back("--" + flag);
  }
  return out;
}

}  // namespace

RunResult run_online(const OnlineTarget& target, const Workload& workload, int64_t first,
                     const RunLimits& limits, double rate, uint64_t seed) {
  RunResult run;
  run.request_rate = rate;
  ArrivalSchedule schedule(rate, seed);
  std::deque<RequestRecord> records;  // stable addresses: each thread fills its own
  std::deque<double> finished;
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable cv;
  int64_t in_flight = 0;
  const auto start = clock_type::now();
  int64_t sent = 0;
  for (double next_time = schedule.next(); limits.may_send(sent, next_time);
       next_time = schedule.next()) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<clock_type::duration>(
                                              std::chrono::duration<double>(next_time)));
    {
      std::unique_lock lock(mutex);
      cv.wait(lock,
              [&] { return limits.max_concurrency == 0 || in_flight < limits.max_concurrency; });
      // Waiting for a slot may have run past --duration.
      if (!limits.may_send(sent,
                           std::chrono::duration<double>(clock_type::now() - start).count())) {
        break;
      }
      ++in_flight;
    }
    RequestRecord& rec = records.emplace_back();
    double& done_at = finished.emplace_back(0);
    rec.index = sent;
    const BenchRequest& request = workload.at(first + sent);
    threads.emplace_back([&, r = &rec, d = &done_at, q = &request, t0 = clock_type::now()] {
      send_one(target, *q, start, t0, *r, *d);
      {
        std::lock_guard lock(mutex);
        --in_flight;
      }
      cv.notify_all();
    });
    ++sent;
  }
  for (auto& t : threads) t.join();
  run.records.assign(records.begin(), records.end());
  for (double t : finished) run.elapsed_s = std::max(run.elapsed_s, t);
  return run;
}

std::vector<Json> bench_online(const BenchOptions& o, const config::RecipeConfig& recipe,
                               const Args& args,
                               const std::vector<deepinfer::bench::DatasetEntry>& dataset) {
  // A tokenizer, when the model directory is known, counts ShareGPT answers and draws random
  // ids; the server tokenizes the prompts themselves.
  std::optional<tokenizer::Tokenizer> tok;
  std::string model_dir;
  if (recipe.model_path.has()) {
    // As config::load_model_setup finds it: tokenizer.json, or the GGUF file's own.
    model_dir = config::resolve_model_path(recipe);
    const std::string dir = recipe.tokenizer_path.value_or(model_dir);
    if (std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json") ||
        (!recipe.tokenizer_path.has() && io::gguf_model_file(model_dir))) {
      tok = tokenizer::Tokenizer::load_dir(dir);
    }
  }
  WorkloadContext context;
  context.default_output_len = recipe.max_new_tokens.value_or(128);
  context.dataset = &dataset;
  if (tok) {
    context.vocab_size = tok->vocab_size();
    context.encode = [&tok](std::string_view s) { return tok->encode(s, true); };
  }
  const Workload workload = make_workload(o, context);

  // Under mpirun (no --base-url): rank 0 serves in this process, the others follow its model.
  const bool distributed = o.base_url.empty() && parallel::launcher_world_size() > 1;
  if (distributed && config::launched_as_worker()) {
    config::follow_driver(recipe);
    return {};  // rank 0 reports
  }
  std::unique_ptr<ServerProcess> server;
  std::unique_ptr<InProcessServer> local;
  OnlineTarget target;
  target.api_key = args.get_or("api-key", "");
  target.timeout_s = o.request_timeout_s;
  if (o.base_url.empty()) {
    DI_CHECK(recipe.model_path.has(),
             "--mode online needs --base-url URL (a running server) or --model / --config (a "
             "server bench starts)");
    if (distributed) {
      local = InProcessServer::start(recipe, args);
      target.url = local->url();
    } else {
      server = ServerProcess::start(server_args(args), 600);
      target.url = server->url();
    }
  } else {
    target.url = http::parse_url(o.base_url);
  }
  target.model = o.served_model_name.empty() ? first_model_id(target.url, target.api_key)
                                             : o.served_model_name;

  if (o.warmup > 0) {
    log::info("bench: ", o.warmup, " warm-up requests (excluded from the statistics)");
    run_online(target, workload, 0, {o.warmup, 0, o.max_concurrency},
               std::numeric_limits<double>::infinity(), o.seed);
  }
  std::vector<Json> out;
  for (const double rate : o.request_rates) {
    log::info("bench: request rate ", rate_text(rate), " req/s");
    MetricsSampler sampler(target.url);
    RunResult run = run_online(target, workload, o.warmup,
                               {o.num_samples, o.duration_s, o.max_concurrency}, rate, o.seed);
    sampler.finish();
    run.resources["peak_rss_mb"] = server ? Json(server->peak_rss_mib()) : Json(nullptr);
    run.resources["peak_kv_cache_usage"] =
        sampler.peak_usage() ? Json(*sampler.peak_usage()) : Json(nullptr);
    if (sampler.peak_usage() && sampler.total_blocks()) {
      run.resources["kv_blocks"] = static_cast<int64_t>(*sampler.total_blocks());
      run.resources["peak_kv_blocks"] =
          static_cast<int64_t>(std::llround(*sampler.peak_usage() * *sampler.total_blocks()));
    }
    Json header;
    header["mode"] = "online";
    header["model"] = target.model;
    header["base_url"] =
        str_cat("http://", target.url.host, ":", target.url.port, target.url.base_path);
    header["server"] = server  ? "started by bench"
                       : local ? "in bench's process (rank 0 of mpirun)"
                               : "external";
    header["dataset"] = workload.source;
    header["num_prompts"] = static_cast<int64_t>(run.records.size());
    header["input_len"] = o.input_len ? Json(*o.input_len) : Json(nullptr);
    header["output_len"] = o.output_len ? Json(*o.output_len) : Json(nullptr);
    header["seed"] = o.seed;
    out.push_back(run_json(run, o, header));
  }
  if (server) {
    const int status = server->stop();
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      log::warn("bench: the server exited with status ", status, "; its log ends:\n",
                server->log_tail());
    }
  }
  return out;
}

}  // namespace deepinfer::cli::bench
