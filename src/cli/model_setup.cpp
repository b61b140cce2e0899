#include "cli/model_setup.h"

#include <chrono>
#include <filesystem>

#include "cli/model_flags.h"
#include "core/log.h"

namespace deepinfer::cli {

LoadedModel load_model_from_flags(const Args& args) {
  LoadedModel out;
  out.dir = args.require("model");
  out.pool = thread_pool_from(args);
  const auto start = std::chrono::steady_clock::now();
  out.model = model::load_model(out.dir, load_options_from(args));
  out.load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::info("loaded ", out.model->config().architecture, " from ", out.dir, " in ",
            out.load_seconds, " s");
  out.generation = io::GenerationConfig::load(out.dir, out.model->config());
  if (std::filesystem::exists(std::filesystem::path(out.dir) / "tokenizer.json")) {
    out.tokenizer = tokenizer::Tokenizer::load_dir(out.dir);
  }
  return out;
}

}  // namespace deepinfer::cli
