#pragma once
// `deepinfer run --mode local`: a chat in the terminal. Each line is a user turn; the whole
// conversation is rendered through the model's chat template and the answer streams out as
// it is generated. Commands: /reset (forget the conversation), /exit (or /quit, or Ctrl-D).
// Ctrl-C stops the answer being generated; at the prompt it asks for /exit.
//
// With stdin not a terminal (a pipe, a file) no prompt is printed: stdout holds exactly each
// answer followed by a newline, so scripts and tests can read it.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "config/runtime.h"

namespace deepinfer::cli {

struct ChatTurnResult {
  std::string text;
  std::string finish_reason;  // stop | length | abort
};

// Runs one answer for `messages` (chat template) or, with a model that has no chat template,
// for the last user message as a plain prompt; streams text to `out` as it comes.
ChatTurnResult answer_chat(config::Runtime& rt, const nlohmann::ordered_json& messages,
                           std::FILE* out);

// The read-answer loop over stdin; returns the exit code.
int run_local_chat(config::Runtime& rt);

}  // namespace deepinfer::cli
