#pragma once
// The C++ side of deepinfer.InferenceEngine, free of Python: a started config::Runtime,
// request building (defaults from the config, per-call overrides, validation) and streams.
// module.cpp adds the Python types, the GIL handling and the exception mapping.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/runtime.h"
#include "core/error.h"

namespace deepinfer::python {

// A bad argument of a Python call (becomes ValueError), as opposed to a failure while
// running (RuntimeError).
class ArgumentError : public Error {
 public:
  using Error::Error;
};

// The keyword arguments of generate() / chat(); nullopt: the config's default.
struct CallOptions {
  std::optional<int64_t> max_new_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;
  bool ignore_eos = false;  // generate max_new_tokens whatever the model says (benchmarks)
};

class Session {
 public:
  // The settings the constructor's arguments describe; throws config::ConfigError /
  // ArgumentError for bad ones.
  static config::RecipeConfig recipe(const std::optional<std::string>& config_path,
                                     const std::optional<std::string>& model_path,
                                     const nlohmann::json& overrides);
  // Loads and starts (under mpirun: rank 0, whose model runs in lockstep with the others).
  // Throws config::ConfigError for bad settings, Error when loading fails.
  static std::unique_ptr<Session> start(const config::RecipeConfig& recipe);

  config::Runtime& runtime() {
    if (!runtime_) throw Error("this InferenceEngine is closed");
    return *runtime_;
  }
  // Stops the engine and frees the model now, even while streams still hold the session
  // (interpreter exit under mpirun: the other ranks are released before MPI_Finalize).
  void close() { runtime_.reset(); }

  // Prompt ids: a text prompt as transformers' tokenizer(text); a conversation through the
  // chat template. Throw ArgumentError for empty or malformed input.
  std::vector<int32_t> encode_text(const std::string& prompt) const;
  std::vector<int32_t> encode_messages(const nlohmann::ordered_json& messages,
                                       const nlohmann::ordered_json& template_kwargs) const;

  // Sampling parameters for one prompt: the config's defaults, then `options`; validated,
  // max_new_tokens fitted to max_model_len. Throws ArgumentError.
  engine::SamplingParams params_for(const std::vector<int32_t>& prompt,
                                    const CallOptions& options) const;
  // Validates and submits; throws ArgumentError (nothing submitted) when the engine refuses.
  std::shared_ptr<engine::RequestStream> submit(const std::vector<int32_t>& prompt,
                                                const engine::SamplingParams& params);
  void abort(engine::RequestId id) {
    if (runtime_) runtime_->client().abort(id);
  }

 private:
  std::unique_ptr<config::Runtime> runtime_;
};

}  // namespace deepinfer::python
