#!/usr/bin/env bash
# Installs everything deepinfer needs on a fresh Debian 12 machine. Idempotent: a second
# run installs nothing and takes a second. Python test tools go into ./.venv.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake pkg-config git ccache
  nlohmann-json3-dev libgtest-dev googletest libgmock-dev
  libpcre2-dev libutf8proc-dev libcpp-httplib-dev
  clang libclang-rt-14-dev clang-format
  python3 python3-venv python3-dev
  libyaml-cpp-dev pybind11-dev
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Python tools for the integration tests (no torch: goldens are committed).
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Reinstall whenever the pinned requirements change (a stamp holds their hash).
stamp=.venv/.requirements.sha256
want=$(sha256sum tests/integration/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r tests/integration/requirements.txt
  echo "$want" > "$stamp"
fi
