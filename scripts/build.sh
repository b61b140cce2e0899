#!/usr/bin/env bash
# Configures and builds. usage: scripts/build.sh [run|release|sanitize|fuzz]
#   run       build/: only the deepinfer command and the _deepinfer Python module (make run)
#   release   build/: everything, unit tests and benchmarks included (make test)
#   sanitize  build-sanitize/: Debug + ASan/UBSan unit tests
#   fuzz      build-fuzz/: the libFuzzer targets and the deepinfer command, both with ASan +
#             UBSan (clang; one library build serves both)
# CMake's and the compiler's output goes to .cache/build-KIND.log, shown only when the build
# fails (VERBOSE=1 shows it as it happens).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/quiet.sh
kind=${1:-release}
jobs=${JOBS:-$(nproc)}
# ccache (if installed) keyed on paths relative to the checkout, so clones share hits.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
mkdir -p .cache
log=.cache/build-$kind.log
: >"$log"
start=$(date +%s)
configure() { quietly "$log" "build: cmake configure ($kind)" cmake "$@"; }
build() { quietly "$log" "build: compile ($kind)" cmake --build "$@"; }
case "$kind" in
  run)
    # The same build/ as release (objects are shared); tests and benches switched off.
    configure -S . -B build -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_BUILD_TESTS=OFF \
      -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_BUILD_CLI=ON -DDEEPINFER_BUILD_PYTHON=ON
    build build -j "$jobs"
    ;;
  release)
    configure -S . -B build -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_BUILD_TESTS=ON \
      -DDEEPINFER_BUILD_BENCH=ON -DDEEPINFER_BUILD_CLI=ON -DDEEPINFER_BUILD_PYTHON=ON
    build build -j "$jobs"
    ;;
  sanitize)
    configure -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DDEEPINFER_SANITIZE=ON \
      -DDEEPINFER_BUILD_CLI=OFF -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_BUILD_PYTHON=OFF
    build build-sanitize -j "$jobs" --target deepinfer_unit_tests
    ;;
  fuzz)
    CC=clang CXX=clang++ configure -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDEEPINFER_BUILD_FUZZERS=ON -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_BUILD_CLI=ON \
      -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_BUILD_PYTHON=OFF
    build build-fuzz -j "$jobs"
    ;;
  *)
    echo "usage: scripts/build.sh [run|release|sanitize|fuzz]" >&2
    exit 2
    ;;
esac
echo "build: $kind done in $(($(date +%s) - start)) s (log: $log)"
