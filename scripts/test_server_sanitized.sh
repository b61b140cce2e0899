#!/usr/bin/env bash
# The server integration tests (tests/integration/test_server*.py) against the ASan + UBSan
# deepinfer of `scripts/build.sh fuzz`. The server runs as a child of the tests, which may not
# read its stderr, so every sanitizer report goes to a file under build-fuzz/sanitizer-logs/
# instead; any file there fails the run, after the tests, with the reports shown.
# usage: scripts/test_server_sanitized.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/build-fuzz/deepinfer
[ -x "$bin" ] || {
  echo "test_server_sanitized: $bin not built: run scripts/build.sh fuzz" >&2
  exit 1
}
logs=$PWD/build-fuzz/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
status=0
DEEPINFER_BIN=$bin DEEPINFER_SANITIZED=1 DEEPINFER_SHUTDOWN_RUNS=${DEEPINFER_SHUTDOWN_RUNS:-3} \
  ASAN_OPTIONS="detect_leaks=1:log_path=$logs/asan" \
  LSAN_OPTIONS="log_path=$logs/lsan" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan" \
  .venv/bin/python -m pytest -q tests/integration/test_server*.py "$@" || status=$?
shopt -s nullglob
reports=("$logs"/*)
if [ ${#reports[@]} != 0 ]; then
  for report in "${reports[@]}"; do
    echo "=== $report"
    cat "$report"
  done
  echo "test_server_sanitized: ${#reports[@]} sanitizer report(s) in $logs" >&2
  exit 1
fi
exit "$status"
