#include "cli/local_chat.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "core/log.h"

namespace deepinfer::cli {
namespace {

// Ctrl-C: set by the handler, read by the loops (an async-signal-safe flag only).
std::atomic<bool> g_interrupted{false};

void on_sigint(int) {
  g_interrupted.store(true);
}

// Installs the SIGINT handler (the loops poll its flag); restores the previous handler on
// destruction.
class SigintGuard {
 public:
  SigintGuard() {
    struct sigaction action {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    sigaction(SIGINT, &action, &previous_);
  }
  ~SigintGuard() { sigaction(SIGINT, &previous_, nullptr); }

 private:
  struct sigaction previous_ {};
};

// Reads stdin line by line with poll(2) + read(2), so Ctrl-C is seen while waiting.
class LineReader {
 public:
  enum class Status { line, eof, interrupted };

  Status next(std::string& line) {
    line.clear();
    while (true) {
      const size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Status::line;
      }
      if (eof_) {
        if (buffer_.empty()) return Status::eof;
        line.swap(buffer_);
        return Status::line;
      }
      // SIGINT may be delivered to any thread (the engine's workers too), so the read does
      // not reliably see EINTR: wait in short polls and look at the flag in between.
      pollfd input{0, POLLIN, 0};
      const int ready = ::poll(&input, 1, 100);
      if (g_interrupted.exchange(false)) return Status::interrupted;
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
      char chunk[4096];
      const ssize_t n = ::read(0, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) {
        if (g_interrupted.exchange(false)) return Status::interrupted;
        continue;
      }
      if (n <= 0) {
        eof_ = true;
        continue;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  std::string buffer_;
  bool eof_ = false;
};

void write_text(std::FILE* out, const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

}  // namespace

ChatTurnResult answer_chat(config::Runtime& rt, const nlohmann::ordered_json& messages,
                           std::FILE* out) {
  const std::vector<int32_t> prompt =
      rt.has_chat_template() ? rt.encode_chat(messages)
                             : rt.encode_prompt(messages.back().at("content").get<std::string>());
  engine::SamplingParams params = rt.sampling_defaults();
  params.max_new_tokens =
      rt.fit_request(static_cast<int64_t>(prompt.size()), params.max_new_tokens);
  auto stream = rt.client().submit(prompt, params);

  ChatTurnResult result;
  g_interrupted.store(false);
  bool aborted = false;
  while (true) {
    const auto output = stream->next(std::chrono::milliseconds(50));
    if (!output) {
      if (stream->done()) break;
      if (g_interrupted.exchange(false) && !aborted) {
        rt.client().abort(stream->id());  // the final output (reason abort) follows
        aborted = true;
      }
      continue;
    }
    if (!output->error.empty()) fail(output->error);
    for (const auto& delta : output->completions) {
      write_text(out, delta.text);
      result.text += delta.text;
      if (delta.finish_reason != engine::FinishReason::none) {
        result.finish_reason = engine::finish_reason_name(delta.finish_reason);
      }
    }
    if (output->finished) break;
  }
  return result;
}

int run_local_chat(config::Runtime& rt) {
  const bool interactive = isatty(0) == 1;
  SigintGuard sigint;
  if (interactive) {
    std::fprintf(stderr,
                 "chatting with %s: type a message; /reset starts over, /exit (or Ctrl-D) quits, "
                 "Ctrl-C stops an answer\n",
                 rt.served_name().c_str());
  }
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  LineReader reader;
  std::string line;
  while (true) {
    if (interactive) write_text(stdout, ">>> ");
    const auto status = reader.next(line);
    if (status == LineReader::Status::eof) {
      if (interactive) write_text(stdout, "\n");
      break;
    }
    if (status == LineReader::Status::interrupted) {
      std::fprintf(stderr, "\n(use /exit or Ctrl-D to quit)\n");
      continue;
    }
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    const std::string text = line.substr(start, line.find_last_not_of(" \t") - start + 1);
    if (text == "/exit" || text == "/quit") break;
    if (text == "/reset") {
      messages = nlohmann::ordered_json::array();
      if (interactive) std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (text[0] == '/' && text.find(' ') == std::string::npos) {
      std::fprintf(stderr, "unknown command %s (commands: /reset, /exit)\n", text.c_str());
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", text}});
    try {
      const ChatTurnResult reply = answer_chat(rt, messages, stdout);
      write_text(stdout, "\n");
      if (reply.finish_reason == "length" && interactive) {
        std::fprintf(stderr, "(answer cut at max_new_tokens)\n");
      }
      if (reply.finish_reason == "abort") {
        // An interrupted answer is not part of the conversation.
        messages.erase(messages.size() - 1);
        continue;
      }
      messages.push_back({{"role", "assistant"}, {"content", reply.text}});
    } catch (const Error& e) {
      messages.erase(messages.size() - 1);
      std::fprintf(stderr, "error: %s\n", e.what());
      if (!interactive) return 1;
    }
  }
  return 0;
}

}  // namespace deepinfer::cli
