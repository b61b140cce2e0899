// Single-thread encode throughput and tokenizer.json load time (standalone driver; the peer
// of tools/bench_tokenizer_python.py, which also writes the shared ~10 MB text file).
//
//   g++ -std=c++20 -O2 -Isrc bench/tokenizer_bench.cpp build/libdeepinfer.a -lpthread
//       $(pkg-config --libs libpcre2-8 libutf8proc) -o tokenizer_bench
//   .venv-tools/bin/python tools/bench_tokenizer_python.py --model ../shared/tokenizers/qwen3
//   ./tokenizer_bench --model ../shared/tokenizers/qwen3 [--text bench/out/tokenizer_bench.txt]
//       [--chunk 4096] [--repeat 3]
//
// The text is cut into ~chunk-byte pieces at line ends and encoded one piece per call, as
// the Python driver does. A fresh Tokenizer is loaded for every repeat so that the word
// cache starts cold each time (Python's starts cold once). Prints one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "core/text_file.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer;

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> chunks(const std::string& text, size_t size) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.size(), start + size);
    const size_t nl = text.find('\n', end);
    end = nl == std::string::npos ? text.size() : nl + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

std::string flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == "--" + name) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = flag(argc, argv, "model", "");
  if (model.empty()) {
    std::fprintf(stderr,
                 "usage: tokenizer_bench --model DIR [--text FILE] [--chunk N] [--repeat N]\n");
    return 2;
  }
  const std::string text_path = flag(argc, argv, "text", "bench/out/tokenizer_bench.txt");
  const size_t chunk = std::stoul(flag(argc, argv, "chunk", "4096"));
  const int repeat = std::stoi(flag(argc, argv, "repeat", "3"));
  try {
    const std::string text = read_text_file(text_path);
    const auto pieces = chunks(text, chunk);
    double best_load = 1e30, best_wall = 1e30, best_cpu = 1e30;
    size_t ids = 0;
    for (int r = 0; r < repeat; ++r) {
      const double load_start = wall_seconds();
      const auto tok = tokenizer::Tokenizer::load_dir(model);
      best_load = std::min(best_load, wall_seconds() - load_start);
      const double wall = wall_seconds(), cpu = cpu_seconds();
      ids = 0;
      for (const auto& piece : pieces) ids += tok.encode(piece, false).size();
      best_wall = std::min(best_wall, wall_seconds() - wall);
      best_cpu = std::min(best_cpu, cpu_seconds() - cpu);
    }
    std::printf(
        "{\"impl\": \"deepinfer\", \"model\": \"%s\", \"bytes\": %zu, \"chunks\": %zu, "
        "\"ids\": %zu, \"load_ms\": %.1f, \"mb_per_s_wall\": %.2f, \"mb_per_s_cpu\": %.2f}\n",
        model.c_str(), text.size(), pieces.size(), ids, best_load * 1000,
        static_cast<double>(text.size()) / best_wall / 1e6,
        static_cast<double>(text.size()) / best_cpu / 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
