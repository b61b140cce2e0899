// _deepinfer: the Python binding (pybind11). deepinfer.InferenceEngine loads a recipe config
// or a checkpoint and answers generate() / chat(), blocking or streaming. Every wait on the
// engine runs with the GIL released (other Python threads keep running) and wakes every
// 100 ms to let Python handle signals: Ctrl-C aborts the request and raises
// KeyboardInterrupt. Errors: bad arguments / configs -> ValueError, failures -> RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/recipe_config.h"
#include "config/setup.h"
#include "core/log.h"
#include "parallel/mpi_communicator.h"
#include "session.h"

namespace py = pybind11;

namespace deepinfer::python {
namespace {

nlohmann::ordered_json to_json(py::handle value, const std::string& where) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) {
    try {
      return value.cast<int64_t>();
    } catch (const py::cast_error&) {
      throw ArgumentError(str_cat(where, ": integer out of range"));
    }
  }
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (py::handle item : value) out.push_back(to_json(item, where));
    return out;
  }
  if (py::isinstance<py::dict>(value)) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& [key, item] : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key)) {
        throw ArgumentError(str_cat(where, ": dict keys must be strings"));
      }
      out[key.cast<std::string>()] = to_json(item, where);
    }
    return out;
  }
  throw ArgumentError(str_cat(where, ": cannot use a value of type ",
                              py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
}

std::optional<std::string> path_arg(const py::object& value) {
  if (value.is_none()) return std::nullopt;
  return py::str(py::module_::import("os").attr("fspath")(value)).cast<std::string>();
}

std::vector<std::string> stop_arg(const py::object& stop) {
  if (stop.is_none()) return {};
  if (py::isinstance<py::str>(stop)) return {stop.cast<std::string>()};
  try {
    return stop.cast<std::vector<std::string>>();
  } catch (const py::cast_error&) {
    throw ArgumentError("stop must be a string or a list of strings");
  }
}

// The next output of `stream`, waiting with the GIL released; nullopt after the last one.
std::optional<engine::RequestOutput> next_output(Session& session, engine::RequestStream& stream) {
  while (true) {
    std::optional<engine::RequestOutput> out;
    {
      py::gil_scoped_release release;
      out = stream.next(std::chrono::milliseconds(100));
    }
    if (out) return out;
    if (stream.done()) return std::nullopt;
    if (PyErr_CheckSignals() != 0) {
      session.abort(stream.id());
      throw py::error_already_set();
    }
  }
}

std::string text_of(const engine::RequestOutput& out) {
  if (!out.error.empty()) throw Error(out.error);
  std::string text;
  for (const auto& delta : out.completions) text += delta.text;
  return text;
}

// stream=True: an iterator of text pieces as they are generated.
class TextStream {
 public:
  TextStream(std::shared_ptr<Session> session, std::shared_ptr<engine::RequestStream> stream)
      : session_(std::move(session)), stream_(std::move(stream)) {}
  TextStream(TextStream&& other) noexcept
      : session_(std::move(other.session_)),
        stream_(std::move(other.stream_)),
        finished_(other.finished_),
        finish_reason_(std::move(other.finish_reason_)) {
    other.finished_ = true;  // a moved-from stream aborts nothing
  }
  TextStream(const TextStream&) = delete;
  TextStream& operator=(const TextStream&) = delete;
  TextStream& operator=(TextStream&&) = delete;
  ~TextStream() { close(); }

  std::string next() {
    while (!finished_) {
      const auto out = next_output(*session_, *stream_);
      if (!out) {
        finished_ = true;
        break;
      }
      for (const auto& delta : out->completions) {
        if (delta.finish_reason != engine::FinishReason::none) {
          finish_reason_ = engine::finish_reason_name(delta.finish_reason);
        }
      }
      if (out->finished) finished_ = true;
      std::string text = text_of(*out);
      if (!text.empty()) return text;
    }
    throw py::stop_iteration();
  }
  // Stops generating (the request is aborted); iteration ends.
  void close() {
    if (!finished_ && stream_ && !stream_->done()) session_->abort(stream_->id());
    finished_ = true;
  }
  py::object finish_reason() const {
    return finish_reason_.empty() ? py::object(py::none()) : py::object(py::str(finish_reason_));
  }

 private:
  std::shared_ptr<Session> session_;
  std::shared_ptr<engine::RequestStream> stream_;
  bool finished_ = false;
  std::string finish_reason_;
};

// Engines not yet closed: at interpreter exit they are closed before MPI_Finalize (under
// mpirun, closing rank 0's engine is what lets the other ranks finish).
std::vector<std::weak_ptr<Session>>& live_sessions() {
  static std::vector<std::weak_ptr<Session>> sessions;
  return sessions;
}

void close_all_and_finalize() {
  for (const auto& weak : live_sessions()) {
    if (const auto session = weak.lock()) session->close();
  }
  live_sessions().clear();
  parallel::mpi_finalize();
}

// A failure on one rank of a distributed run: one line, then every rank ends (MPI_Abort).
[[noreturn]] void end_job(const std::string& message) {
  std::fprintf(stderr, "deepinfer: error: rank %d: %s\n", parallel::launcher_rank(),
               message.c_str());
  std::fflush(stderr);
  parallel::mpi_abort_job(1);
  std::_Exit(1);
}

// Ranks > 0 under mpirun: the constructor follows rank 0's engine until it closes, then the
// process exits cleanly (SystemExit(0), after MPI_Finalize); the rest of the script never
// runs on these ranks.
[[noreturn]] void follow_and_exit(const config::RecipeConfig& recipe) {
  {
    py::gil_scoped_release release;
    try {
      config::follow_driver(recipe);
    } catch (const std::exception& e) {
      end_job(e.what());
    }
  }
  close_all_and_finalize();
  PyErr_SetObject(PyExc_SystemExit, py::int_(0).ptr());
  throw py::error_already_set();
}

class InferenceEngine {
 public:
  InferenceEngine(const py::object& config_path, const py::object& model_path,
                  const py::kwargs& kwargs) {
    nlohmann::json overrides = nlohmann::json::object();
    for (const auto& [key, value] : kwargs) {
      const std::string name = key.cast<std::string>();
      if (name == "log_level") {
        log::set_level(log::parse_level(value.cast<std::string>()));
        continue;
      }
      overrides[name] = nlohmann::json(to_json(value, name));
    }
    const config::RecipeConfig recipe =
        Session::recipe(path_arg(config_path), path_arg(model_path), overrides);
    if (config::launched_as_worker()) follow_and_exit(recipe);
    {
      py::gil_scoped_release release;  // loading takes a while; other threads may run
      try {
        session_ = Session::start(recipe);
      } catch (const std::exception& e) {
        // Under mpirun the other ranks wait in a collective for this one: end them all.
        if (parallel::launcher_world_size() > 1) end_job(e.what());
        throw;
      }
    }
    live_sessions().push_back(session_);
  }

  py::object generate(const py::object& prompt, const CallOptions& options, bool stream) {
    if (py::isinstance<py::str>(prompt)) {
      return run_one(check().encode_text(prompt.cast<std::string>()), options, stream);
    }
    if (!py::isinstance<py::list>(prompt) && !py::isinstance<py::tuple>(prompt)) {
      throw py::type_error("prompt must be a str or a list of str");
    }
    if (stream) {
      throw ArgumentError(
          "stream=True takes one prompt (a str), not a list; iterate over the "
          "prompts, or use stream=False to run the list as one batch");
    }
    std::vector<std::vector<int32_t>> prompts;
    for (py::handle item : prompt) {
      if (!py::isinstance<py::str>(item)) throw py::type_error("every prompt must be a str");
      prompts.push_back(check().encode_text(item.cast<std::string>()));
    }
    if (prompts.empty()) throw ArgumentError("prompt is an empty list: give at least one prompt");
    return py::cast(run_batch(prompts, options));
  }

  py::object chat(const py::object& messages, const CallOptions& options, bool stream,
                  const py::object& template_kwargs) {
    const auto ids = check().encode_messages(to_json(messages, "messages"),
                                             to_json(template_kwargs, "chat_template_kwargs"));
    return run_one(ids, options, stream);
  }

  void close() {
    if (!session_) return;
    py::gil_scoped_release release;
    session_->close();
    session_.reset();
  }

  Session& check() const {
    if (!session_) throw Error("this InferenceEngine is closed");
    return *session_;
  }
  config::Runtime& runtime() const { return check().runtime(); }

 private:
  py::object run_one(const std::vector<int32_t>& prompt, const CallOptions& options, bool stream) {
    Session& session = check();
    const auto request = session.submit(prompt, session.params_for(prompt, options));
    if (stream) return py::cast(TextStream(session_, request));
    std::string text;
    while (const auto out = next_output(session, *request)) text += text_of(*out);
    return py::str(text);
  }

  // All prompts are submitted before any is awaited, so they share the engine's batches.
  std::vector<std::string> run_batch(const std::vector<std::vector<int32_t>>& prompts,
                                     const CallOptions& options) {
    Session& session = check();
    std::vector<engine::SamplingParams> params;
    for (const auto& p : prompts) params.push_back(session.params_for(p, options));
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    try {
      for (size_t i = 0; i < prompts.size(); ++i)
        streams.push_back(session.submit(prompts[i], params[i]));
    } catch (...) {
      for (const auto& s : streams) session.abort(s->id());
      throw;
    }
    std::vector<std::string> texts(prompts.size());
    try {
      for (size_t i = 0; i < streams.size(); ++i) {
        while (const auto out = next_output(session, *streams[i])) texts[i] += text_of(*out);
      }
    } catch (...) {
      for (const auto& s : streams) session.abort(s->id());
      throw;
    }
    return texts;
  }

  std::shared_ptr<Session> session_;
};

}  // namespace
}  // namespace deepinfer::python

PYBIND11_MODULE(_deepinfer, m) {
  using namespace deepinfer::python;
  using deepinfer::python::CallOptions;
  m.doc() = "deepinfer: LLM / MoE inference engine (C++), Python binding";

  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const ArgumentError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const deepinfer::config::ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const deepinfer::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  py::class_<TextStream>(m, "TextStream",
                         "Iterator over the pieces of text of one answer, as they are generated.")
      .def("__iter__", [](TextStream& s) -> TextStream& { return s; })
      .def("__next__", &TextStream::next)
      .def("close", &TextStream::close, "Stop generating (aborts the request).")
      .def_property_readonly("finish_reason", &TextStream::finish_reason,
                             "stop | length | abort once finished, else None");

  const auto options = [](std::optional<int64_t> max_new_tokens, std::optional<double> temperature,
                          std::optional<double> top_p, std::optional<int64_t> top_k,
                          std::optional<double> repetition_penalty, const py::object& stop,
                          std::optional<int64_t> seed, bool ignore_eos) {
    CallOptions o;
    o.ignore_eos = ignore_eos;
    o.max_new_tokens = max_new_tokens;
    o.temperature = temperature;
    o.top_p = top_p;
    o.top_k = top_k;
    o.repetition_penalty = repetition_penalty;
    o.stop = stop_arg(stop);
    if (seed) {
      if (*seed < 0) throw ArgumentError(deepinfer::str_cat("seed must be >= 0, got ", *seed));
      o.seed = static_cast<uint64_t>(*seed);
    }
    return o;
  };

  py::class_<InferenceEngine>(m, "InferenceEngine")
      .def(py::init<const py::object&, const py::object&, const py::kwargs&>(),
           py::arg("config_path") = py::none(), py::arg("model_path") = py::none(),
           "InferenceEngine(config_path=None, model_path=None, **overrides)\n\n"
           "Loads a recipe config (infer_config.json or .yaml) and/or a checkpoint directory.\n"
           "Keyword overrides win over the config: block_size, max_batch_size, max_seq_len,\n"
           "threads, dtype, temperature, ... (docs/CONFIG.md); log_level='warn' quiets logs.")
      .def(
          "generate",
          [options](InferenceEngine& self, const py::object& prompt,
                    std::optional<int64_t> max_new_tokens, std::optional<double> temperature,
                    std::optional<double> top_p, std::optional<int64_t> top_k,
                    std::optional<double> repetition_penalty, const py::object& stop,
                    std::optional<int64_t> seed, bool stream, bool ignore_eos) {
            return self.generate(prompt,
                                 options(max_new_tokens, temperature, top_p, top_k,
                                         repetition_penalty, stop, seed, ignore_eos),
                                 stream);
          },
          py::arg("prompt"), py::kw_only(), py::arg("max_new_tokens") = py::none(),
          py::arg("temperature") = py::none(), py::arg("top_p") = py::none(),
          py::arg("top_k") = py::none(), py::arg("repetition_penalty") = py::none(),
          py::arg("stop") = py::none(), py::arg("seed") = py::none(), py::arg("stream") = false,
          py::arg("ignore_eos") = false,
          "Continue a prompt (str -> str) or a list of prompts run as one batch (-> list of "
          "str); stream=True returns an iterator of text pieces. Unset arguments take the "
          "config's defaults.")
      .def(
          "chat",
          [options](InferenceEngine& self, const py::object& messages,
                    std::optional<int64_t> max_new_tokens, std::optional<double> temperature,
                    std::optional<double> top_p, std::optional<int64_t> top_k,
                    std::optional<double> repetition_penalty, const py::object& stop,
                    std::optional<int64_t> seed, bool stream, bool ignore_eos,
                    const py::object& template_kwargs) {
            return self.chat(messages,
                             options(max_new_tokens, temperature, top_p, top_k, repetition_penalty,
                                     stop, seed, ignore_eos),
                             stream, template_kwargs);
          },
          py::arg("messages"), py::kw_only(), py::arg("max_new_tokens") = py::none(),
          py::arg("temperature") = py::none(), py::arg("top_p") = py::none(),
          py::arg("top_k") = py::none(), py::arg("repetition_penalty") = py::none(),
          py::arg("stop") = py::none(), py::arg("seed") = py::none(), py::arg("stream") = false,
          py::arg("ignore_eos") = false, py::arg("chat_template_kwargs") = py::none(),
          "Answer a conversation ([{'role': 'user', 'content': ...}, ...]) through the model's "
          "chat template; same options as generate().")
      .def("close", &InferenceEngine::close, "Stop the engine and free the model.")
      .def("__enter__", [](InferenceEngine& self) -> InferenceEngine& { return self; })
      .def("__exit__", [](InferenceEngine& self, const py::args&) { self.close(); })
      .def_property_readonly(
          "model_name", [](const InferenceEngine& self) { return self.runtime().served_name(); })
      .def_property_readonly("model_path",
                             [](const InferenceEngine& self) { return self.runtime().model_dir(); })
      .def_property_readonly("max_model_len",
                             [](const InferenceEngine& self) {
                               return self.runtime().engine().config().max_model_len;
                             })
      .def_property_readonly("sampling_defaults", [](const InferenceEngine& self) {
        const auto& p = self.runtime().sampling_defaults();
        py::dict d;
        d["max_new_tokens"] = p.max_new_tokens;
        d["temperature"] = p.temperature;
        d["top_p"] = p.top_p;
        d["top_k"] = p.top_k;
        d["repetition_penalty"] = p.repetition_penalty;
        d["seed"] = p.seed ? py::object(py::int_(*p.seed)) : py::object(py::none());
        return d;
      });

  m.attr("__version__") = DEEPINFER_VERSION;
  // Under mpirun: engines left open are closed, then MPI finalized, as the interpreter exits.
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    py::gil_scoped_release release;
    close_all_and_finalize();
  }));
}
