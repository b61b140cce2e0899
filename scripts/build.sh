#!/usr/bin/env bash
# Configures and builds. usage: scripts/build.sh [release|sanitize|fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}
jobs=${JOBS:-$(nproc)}
# ccache (if installed) keyed on paths relative to the checkout, so clones share hits.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
case "$kind" in
  release)
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j "$jobs"
    ;;
  sanitize)
    # Debug + ASan/UBSan, unit tests only.
    cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DDEEPINFER_SANITIZE=ON \
      -DDEEPINFER_BUILD_CLI=OFF -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_BUILD_PYTHON=OFF >/dev/null
    cmake --build build-sanitize -j "$jobs" --target deepinfer_unit_tests
    ;;
  fuzz)
    CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDEEPINFER_BUILD_FUZZERS=ON -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_BUILD_CLI=OFF \
      -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_BUILD_PYTHON=OFF >/dev/null
    cmake --build build-fuzz -j "$jobs"
    ;;
  *)
    echo "usage: scripts/build.sh [release|sanitize|fuzz]" >&2
    exit 2
    ;;
esac
