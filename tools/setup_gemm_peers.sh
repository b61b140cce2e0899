#!/usr/bin/env bash
# Installs the GEMM libraries that `kernels_bench --gemm` times beside our kernels (issue #15:
# "compare with oneDNN / OpenBLAS"): Debian's OpenBLAS (pthreads build) and oneDNN (OpenMP
# runtime). Benchmark peers only: the engine never links them, and CI does not install them.
#
#   tools/setup_gemm_peers.sh && scripts/build.sh release && build/kernels_bench --gemm
#
# Idempotent: packages already installed are skipped.
set -euo pipefail
packages=(libopenblas-dev libdnnl-dev)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
fi
echo "GEMM peers installed: ${packages[*]} (rebuild: scripts/build.sh release)"
