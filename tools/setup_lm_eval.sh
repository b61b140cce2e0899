#!/usr/bin/env bash
# A venv for lm-evaluation-harness (PyPI lm-eval), kept out of CI: .venv-lm-eval at the
# repository root. It sees .venv-tools' packages (torch, transformers) through a .pth file, so
# only lm-eval and its light dependencies are downloaded. Used by tools/lm_eval_check.py.
#
#   tools/setup_lm_eval.sh            # after .venv-tools exists (tools/README.md)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools_venv="${DEEPINFER_TOOLS_VENV:-$root/.venv-tools}"
venv="$root/.venv-lm-eval"
[ -x "$tools_venv/bin/python" ] || { echo "setup_lm_eval.sh: $tools_venv/bin/python not found" >&2; exit 1; }
"$tools_venv/bin/python" -m venv "$venv"
site_tools="$("$tools_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
site_eval="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$site_tools" > "$site_eval/deepinfer-tools.pth"
"$venv/bin/python" -m pip install --quiet "lm-eval[api]==0.4.13"
"$venv/bin/python" -c "import lm_eval, transformers; print('lm-eval', lm_eval.__version__ if hasattr(lm_eval, '__version__') else '0.4.13', 'transformers', transformers.__version__)"
