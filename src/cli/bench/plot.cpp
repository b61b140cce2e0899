#include "cli/bench/plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"

namespace deepinfer::cli::bench {
namespace {

namespace fs = std::filesystem;

// The checkout this executable was built in: the first directory above it holding
// bench/plot_bench.py (build/deepinfer -> the repository root).
fs::path repository_root() {
  std::error_code ec;
  fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (int i = 0; i < 4 && !dir.empty(); ++i, dir = dir.parent_path()) {
    if (fs::exists(dir / "bench" / "plot_bench.py")) return dir;
    if (dir == dir.parent_path()) break;
  }
  fail("--plot: bench/plot_bench.py not found above ", fs::read_symlink("/proc/self/exe", ec),
       " (run the deepinfer of a repository checkout)");
}

// Exit status of the plot script when matplotlib cannot be imported.
constexpr int kNoMatplotlib = 3;

}  // namespace

void plot_results(const std::string& results_json, const std::string& png) {
  const fs::path root = repository_root();
  std::string python;
  if (const char* env = std::getenv("DEEPINFER_PYTHON"); env && *env) {
    python = env;
  } else if (fs::exists(root / ".venv" / "bin" / "python")) {
    python = (root / ".venv" / "bin" / "python").string();
  } else {
    python = "python3";
  }
  const std::string script = (root / "bench" / "plot_bench.py").string();
  const pid_t pid = fork();
  DI_CHECK(pid >= 0, "--plot: fork failed");
  if (pid == 0) {
    execlp(python.c_str(), python.c_str(), script.c_str(), results_json.c_str(), png.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  DI_CHECK(code != 127, "--plot: cannot run ", python,
           " (set DEEPINFER_PYTHON, or make the venv: scripts/setup.sh run)");
  DI_CHECK(code != kNoMatplotlib, "--plot: matplotlib is not installed in ", python,
           ": run scripts/setup.sh run (it installs matplotlib into .venv), or pip install "
           "matplotlib; the results themselves are complete");
  DI_CHECK(code == 0, "--plot: ", script, " failed (exit status ", code, ")");
  log::info("bench: plot written to ", png);
}

}  // namespace deepinfer::cli::bench
