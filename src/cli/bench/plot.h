#pragma once
// --plot FILE.png: bench/plot_bench.py draws the results JSON with matplotlib (latency vs
// request rate when several rates ran, else TTFT / TPOT histograms), run by the repository's
// .venv python (DEEPINFER_PYTHON overrides). Throws Error saying what to install when
// matplotlib is missing.
#include <string>

namespace deepinfer::cli::bench {

void plot_results(const std::string& results_json, const std::string& png);

}  // namespace deepinfer::cli::bench
