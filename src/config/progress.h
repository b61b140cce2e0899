#pragma once
// A progress bar on stderr, drawn only when stderr is a terminal (logs piped to a file stay
// clean), and the checkpoint pre-fault that uses it while a large model loads.
#include <chrono>
#include <cstdint>
#include <string>

namespace deepinfer::config {

class ProgressBar {
 public:
  // `enabled` false (or stderr not a TTY): every call is a no-op.
  ProgressBar(std::string label, uint64_t total_bytes, bool enabled = true);
  ~ProgressBar();  // finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(uint64_t done_bytes);  // redrawn at most ~10 times a second
  void finish();                     // final 100% line and a newline
  bool active() const { return active_; }

  // "[#########           ]  45%  1.2/2.6 GiB  label", `width` characters of bar.
  static std::string render(const std::string& label, uint64_t done, uint64_t total, int width);

 private:
  void draw(uint64_t done);
  std::string label_;
  uint64_t total_;
  bool active_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

// Reads every page of the checkpoint's *.safetensors files once, so the mmapped weights are
// resident before the model is built, with a progress bar (when stderr is a TTY and the
// files exceed `bar_threshold_bytes`). Skipped, with a log line, when the files do not fit
// in the memory available. Returns the bytes read (0 when skipped).
uint64_t prefault_checkpoint(const std::string& model_dir, bool progress,
                             uint64_t bar_threshold_bytes = 256ull << 20);

// `value` with `digits` decimals ("%.*f"), for the start-up log lines.
std::string fixed(double value, int digits);

// MemTotal / MemAvailable of /proc/meminfo in bytes (0 when unknown).
uint64_t memory_total_bytes();
uint64_t memory_available_bytes();

}  // namespace deepinfer::config
