#!/usr/bin/env bash
# The main job on the built-in default: greedy generation with the bundled tiny Qwen3 model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
MODEL=${MODEL:-tests/data/tiny-qwen3}
set -x
./build/deepinfer info --model "$MODEL"
./build/deepinfer generate --model "$MODEL" --prompt "The fox said: hello" --max-new-tokens 24 --json
