#!/usr/bin/env bash
# Python environment for the golden/tiny-model generators in tools/ (torch, transformers,
# tokenizers, jinja2). Only needed to regenerate goldens; CI never runs it.
# Idempotent; installs into ./.venv-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv-tools/bin/python ] || "$PYTHON" -m venv .venv-tools
stamp=.venv-tools/.requirements.sha256
want=$(sha256sum tools/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv-tools/bin/pip install -q --upgrade pip
  .venv-tools/bin/pip install -q -r tools/requirements.txt
  echo "$want" > "$stamp"
fi
