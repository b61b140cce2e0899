#!/usr/bin/env bash
# Runs every fuzzer built by `scripts/build.sh fuzz` for N seconds each (default 30).
# usage: scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shopt -s nullglob
found=0
for src in tests/fuzz/*_fuzz.cpp; do
  name=$(basename "$src" .cpp)
  found=1
  corpus_seed=tests/fuzz/corpus/$name
  work=build-fuzz/corpus/$name
  mkdir -p "$work"
  [ -d "$corpus_seed" ] && cp -n "$corpus_seed"/* "$work"/ 2>/dev/null || true
  echo "fuzz: $name for ${seconds}s"
  "build-fuzz/tests/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$work" 2>&1 | tail -n 4
done
[ "$found" = 1 ] || echo "fuzz: no fuzz targets"
