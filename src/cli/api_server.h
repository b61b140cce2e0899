#pragma once
// The OpenAI-compatible HTTP API in front of a config::Runtime: the one server start of
// `deepinfer serve` and `deepinfer run --mode api`. The port is bound before the model
// loads, so a taken port fails at once and /health answers 503 meanwhile.
#include <set>
#include <string>

#include "cli/args.h"
#include "config/recipe_config.h"
#include "server/server.h"

namespace deepinfer::cli {

// --host --port --api-key --api-key-file --max-body-bytes --max-waiting-requests
// --max-waiting-tokens --shutdown-timeout --http-threads --request-timeout --tool-call-parser
// --max-logprobs --allowed-hosts --allowed-origins --allowed-methods --allowed-headers
extern const std::set<std::string> kServerFlags;
// --disable-log-requests --enable-auto-tool-choice (accepted: tools are always on)
// --allow-credentials
extern const std::set<std::string> kServerBoolFlags;

// The server flags, checked (Error naming the flag).
server::ServerOptions server_options_from(const Args& args);

struct ApiOptions {
  bool warm_up = true;
  // generation_config.json supplies the sampling defaults a request omits (vLLM's
  // --generation-config auto); the config's own sampling keys win over it either way.
  bool generation_defaults = true;
};

// Binds, loads `config` (config::Runtime), serves until SIGTERM / SIGINT; the exit code.
int serve_api(const Args& args, const config::RecipeConfig& config, const ApiOptions& options);

}  // namespace deepinfer::cli
