#!/usr/bin/env bash
# Installs the GEMM libraries that `kernels_bench --gemm` times beside our kernels (issue #15:
# "compare with oneDNN / OpenBLAS"): Debian's OpenBLAS (pthreads build) and oneDNN (OpenMP
# runtime). Benchmark peers only: the engine never links them, and CI does not install them.
#
#   tools/setup_gemm_peers.sh && scripts/build.sh release && build/kernels_bench --gemm
#
# Idempotent: packages already installed are skipped. apt's output goes to
# .cache/setup-peers.log, shown only when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/quiet.sh
mkdir -p .cache
log=.cache/setup-peers.log
: >"$log"
apt_install_missing "$log" libopenblas-dev libdnnl-dev
echo "GEMM peers installed: OpenBLAS, oneDNN (rebuild: scripts/build.sh release)"
