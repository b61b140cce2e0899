#include "config/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;

uint64_t meminfo(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream value(line.substr(prefix.size()));
    uint64_t kib = 0;
    value >> kib;
    return kib * 1024;
  }
  return 0;
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, bool enabled)
    : label_(std::move(label)), total_(total_bytes), active_(enabled && isatty(2) == 1) {
  if (active_) draw(0);
}

ProgressBar::~ProgressBar() {
  finish();
}

std::string ProgressBar::render(const std::string& label, uint64_t done, uint64_t total,
                                int width) {
  const double fraction =
      total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int filled = static_cast<int>(fraction * width);
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '#') +
                    std::string(static_cast<size_t>(width - filled), ' ') + "]";
  char tail[96];
  std::snprintf(tail, sizeof tail, " %3d%%  %s/%s GiB  ", static_cast<int>(fraction * 100),
                gib(done).c_str(), gib(total).c_str());
  return bar + tail + label;
}

void ProgressBar::update(uint64_t done_bytes) {
  if (!active_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  draw(done_bytes);
}

void ProgressBar::draw(uint64_t done) {
  last_draw_ = std::chrono::steady_clock::now();
  const std::string line = render(label_, done, total_, 30);
  std::fprintf(stderr, "\r%s", line.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!active_ || finished_) return;
  draw(total_);
  std::fprintf(stderr, "\n");
  finished_ = true;
}

uint64_t memory_total_bytes() {
  return meminfo("MemTotal");
}
uint64_t memory_available_bytes() {
  return meminfo("MemAvailable");
}

uint64_t prefault_checkpoint(const std::string& model_dir, bool progress,
                             uint64_t bar_threshold_bytes) {
  const std::vector<std::string> files = io::Checkpoint::weight_files(model_dir);
  uint64_t total = 0;
  for (const auto& file : files) total += fs::file_size(file);
  const uint64_t available = memory_available_bytes();
  if (available != 0 && total > available / 10 * 9) {
    log::info("checkpoint (", gib(total), " GiB) exceeds the memory available (", gib(available),
              " GiB): weights will be paged in as they are used");
    return 0;
  }
  ProgressBar bar("loading weights", total, progress && total >= bar_threshold_bytes);
  uint64_t done = 0;
  constexpr size_t kPage = 4096;
  volatile unsigned char sink = 0;
  for (const auto& path : files) {
    const auto file = MappedFile::open(path);
    const auto* bytes = reinterpret_cast<const unsigned char*>(file->data());
    const size_t size = file->size();
    // One read per page faults it in; accumulate so the reads are not optimised away.
    unsigned char acc = 0;
    for (size_t offset = 0; offset < size; offset += kPage) {
      acc ^= bytes[offset];
      if ((offset & ((64u << 20) - 1)) == 0) bar.update(done + offset);
    }
    sink = sink ^ acc;
    done += size;
    bar.update(done);
  }
  bar.finish();
  (void)sink;
  return total;
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

}  // namespace deepinfer::config
