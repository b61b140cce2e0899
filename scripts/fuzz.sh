#!/usr/bin/env bash
# Runs the fuzzers built by `scripts/build.sh fuzz` (build-fuzz/tests/fuzz/*_fuzz).
# usage: scripts/fuzz.sh [--long] [NAME...]     (NAME: e.g. gguf_fuzz; default: every target)
#   default  CI: all targets share FUZZ_TOTAL_SECONDS (default 150 s), split evenly, each
#            starting from its committed seeds in tests/fuzz/corpus/<name>/ plus what earlier
#            runs found (build-fuzz/corpus/<name>/, not committed).
#   --long   each target for FUZZ_RUNS executions (default 1,000,000), one after the other at
#            nice 19; the inputs that add coverage are merged (-merge=1, minimizing) into
#            tests/fuzz/corpus/<name>/, keeping files <= 4 KiB and at most FUZZ_MAX_CORPUS
#            (default 400) files per target. Review and commit the new files.
# A crash, timeout (> 10 s per input), out-of-memory or sanitizer report fails the script; the
# input is saved as build-fuzz/artifacts/<name>/crash-* (or timeout-*, oom-*).
set -euo pipefail
cd "$(dirname "$0")/.."

long=0
if [ "${1:-}" = "--long" ]; then
  long=1
  shift
fi
total_seconds=${FUZZ_TOTAL_SECONDS:-150}
runs=${FUZZ_RUNS:-1000000}
max_corpus=${FUZZ_MAX_CORPUS:-400}
max_len=4096 # bytes: bigger new inputs are not committed

# UBSan is already fatal (-fno-sanitize-recover); the stack says where.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

names=("$@")
if [ ${#names[@]} = 0 ]; then
  shopt -s nullglob
  for src in tests/fuzz/*_fuzz.cpp; do names+=("$(basename "$src" .cpp)"); done
fi
if [ ${#names[@]} = 0 ]; then
  echo "fuzz: no fuzz targets"
  exit 0
fi
for name in "${names[@]}"; do
  [ -x "build-fuzz/tests/fuzz/$name" ] || {
    echo "fuzz: build-fuzz/tests/fuzz/$name not built: run scripts/build.sh fuzz" >&2
    exit 1
  }
done
# Each run takes about a second more than -max_total_time (start-up, final stats).
seconds=$((total_seconds / ${#names[@]} - 1))
[ "$seconds" -ge 1 ] || seconds=1

# run NAME LOG ARGS...: the fuzzer's output goes to LOG; its stats (or, when it fails, the
# report) are shown.
run() {
  local name=$1 log=$2
  shift 2
  mkdir -p "build-fuzz/artifacts/$name"
  if "build-fuzz/tests/fuzz/$name" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$name/" "$@" >"$log" 2>&1 </dev/null; then
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$log" | tr '\n' ' '
    echo
  else
    tail -n 60 "$log"
    echo "fuzz: $name FAILED (log: $log)" >&2
    return 1
  fi
}

mkdir -p build-fuzz/logs
# Long runs take hours of CPU on a shared machine: everything below runs at the lowest priority.
[ "$long" = 0 ] || renice -n 19 -p $$ >/dev/null
start=$(date +%s)
for name in "${names[@]}"; do
  seeds=tests/fuzz/corpus/$name
  mkdir -p "$seeds"
  log=build-fuzz/logs/$name.log
  if [ "$long" = 0 ]; then
    # New inputs go to the first directory (the local one); the seeds are only read.
    work=build-fuzz/corpus/$name
    mkdir -p "$work"
    echo "fuzz: $name for ${seconds} s"
    run "$name" "$log" -max_total_time="$seconds" "$work" "$seeds"
  else
    work=build-fuzz/corpus-long/$name
    rm -rf "$work"
    mkdir -p "$work"
    echo "fuzz: $name for $runs executions (nice 19)"
    run_start=$(date +%s)
    run "$name" "$log" -runs="$runs" "$work" "$seeds"
    echo "fuzz: $name took $(($(date +%s) - run_start)) s"
    before=$(find "$seeds" -type f | wc -l)
    find "$work" -type f -size +"$max_len"c -delete
    # Edges only (-use_counters=0): one input per newly covered edge, not one per hit-count
    # bucket, which would be thousands.
    "build-fuzz/tests/fuzz/$name" -merge=1 -use_counters=0 "$seeds" "$work" \
      >"build-fuzz/logs/$name.merge.log" 2>&1
    after=$(find "$seeds" -type f | wc -l)
    echo "fuzz: $name corpus $before -> $after files"
    if [ "$after" -gt "$max_corpus" ]; then
      echo "fuzz: $seeds has $after files (cap $max_corpus): minimize it by hand" >&2
      exit 1
    fi
  fi
done
echo "fuzz: ${#names[@]} targets done in $(($(date +%s) - start)) s"
