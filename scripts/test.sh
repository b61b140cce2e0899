#!/usr/bin/env bash
# Builds and runs every test: Release build + unit tests, integration tests (pytest, CLI
# against real files), the ASan/UBSan build of the unit tests, the server integration tests
# against the ASan/UBSan CLI of the fuzz build, and the fuzzers (FUZZ_TOTAL_SECONDS, default
# 150 s, for all of them together).
# Prints how long each stage took.
set -euo pipefail
cd "$(dirname "$0")/.."

stage_start=0
stage() { stage_name=$1; stage_start=$(date +%s); echo "=== stage: $stage_name"; }
stage_end() { echo "=== stage: $stage_name took $(( $(date +%s) - stage_start )) s"; }

stage setup; scripts/setup.sh test; stage_end
stage build-release; scripts/build.sh release; stage_end
stage unit-tests; (cd build && ctest --output-on-failure -j "$(nproc)"); stage_end
stage integration-tests
.venv/bin/python -m pytest -q tests/integration
stage_end
stage build-sanitize; scripts/build.sh sanitize; stage_end
stage unit-tests-sanitize; (cd build-sanitize && ctest --output-on-failure -j "$(nproc)"); stage_end
if [ -d tests/fuzz ]; then
  stage build-fuzz; scripts/build.sh fuzz; stage_end
  stage integration-sanitize; scripts/test_server_sanitized.sh; stage_end
  stage fuzz; scripts/fuzz.sh; stage_end
fi
echo "all test stages passed"
