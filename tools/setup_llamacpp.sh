#!/usr/bin/env bash
# Builds llama.cpp's CPU tools (llama-bench, llama-batched-bench, llama-completion, llama-quantize,
# llama-perplexity) as a benchmark and fidelity PEER.
# Never part of the project build or CI: deepinfer does not link or need llama.cpp.
#
# The network here reaches only PyPI and apt, so the llama.cpp sources come from the sdist of
# llama-cpp-python, which vendors a pinned llama.cpp commit under vendor/llama.cpp (together
# with convert_hf_to_gguf.py and the gguf-py package used by tools/convert_to_gguf.py).
#
#   tools/setup_llamacpp.sh            # download (once), build (once), install gguf-py
#   JOBS=4 tools/setup_llamacpp.sh     # more build parallelism where there are cores
#   tools/setup_llamacpp.sh --avx2     # also an AVX2-only build (no AVX-512) in avx2-build-<version>,
#                                      # the peer of DEEPINFER_ISA=avx2 (bench/*.py --isa avx2)
#   tools/setup_llamacpp.sh --no-amx   # also a native build without AMX in noamx-build-<version>,
#                                      # the peer of DEEPINFER_ISA=avx512 (bench/*.py --isa avx512)
#
# Two patches make the native build's AMX path run on an AMX host (issue #47): GCC 12's
# _tile_loadconfig names only 8 bytes of the 64-byte tile configuration as its memory operand, so
# -O3 drops the stores that fill in the rest and the first ldtilecfg faults (upstream
# ggml-org/llama.cpp#26954, open); it becomes an ldtilecfg whose operand is the whole struct.
# And ggml's AMX buffer type claims 3-D weights (DeepSeek's attn_k_b / attn_v_b) that its kernels
# cannot take, then aborts; its supports_op now refuses weights of more than 2 dimensions.
#
# Idempotent: a finished step is skipped. Everything lands in bench/llamacpp-src (git-ignored
# through bench/.gitignore). Prints the path of the built binaries at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="$ROOT/bench/llamacpp-src"
JOBS="${JOBS:-2}"
BUILD_AVX2=0
BUILD_NOAMX=0
for arg in "$@"; do
  case "$arg" in
    --avx2) BUILD_AVX2=1 ;;
    --no-amx) BUILD_NOAMX=1 ;;
    *) echo "usage: tools/setup_llamacpp.sh [--avx2] [--no-amx]" >&2; exit 2 ;;
  esac
done
PY="$ROOT/.venv-tools/bin/python"

mkdir -p "$CACHE"
SDIST="$CACHE/llama_cpp_python-$VERSION.tar.gz"
SRC="$CACHE/llama_cpp_python-$VERSION"
LLAMA="$SRC/vendor/llama.cpp"
BUILD="$CACHE/build-$VERSION"

if [[ ! -f "$SDIST" ]]; then
  echo "== downloading llama-cpp-python==$VERSION sdist"
  "$PY" -m pip download --no-binary :all: --no-deps -d "$CACHE" \
    "llama-cpp-python==$VERSION"
fi
if [[ ! -f "$LLAMA/CMakeLists.txt" ]]; then
  echo "== unpacking"
  tar -xzf "$SDIST" -C "$CACHE"
fi
[[ -f "$LLAMA/CMakeLists.txt" ]] || { echo "error: $LLAMA has no CMakeLists.txt (sdist layout changed?)" >&2; exit 1; }

AMX_DIR="$LLAMA/ggml/src/ggml-cpu/amx"
patched_config() { grep -q 'asm volatile("ldtilecfg' "$AMX_DIR/mmq.cpp"; }
patched_dims() { grep -q "2-D weights only" "$AMX_DIR/amx.cpp"; }
if ! patched_config; then
  echo "== patching ggml's AMX tile configuration (see the top of this script)"
  sed -i 's|^\( *\)_tile_loadconfig(&tc);|\1asm volatile("ldtilecfg %0" : : "m"(tc));  // deepinfer: whole operand|' \
    "$AMX_DIR/mmq.cpp"
fi
if ! patched_dims; then
  echo "== patching ggml's AMX buffer type to refuse 3-D weights (see the top of this script)"
  sed -i 's|^\( *\)if (!ggml_is_contiguous(src0) \|\| !ggml_is_contiguous(src1)) {|\1if (src0->ne[2] != 1 \|\| src0->ne[3] != 1) {  // deepinfer: 2-D weights only\n\1    return false;\n\1}\n&|' \
    "$AMX_DIR/amx.cpp"
fi
patched_config && patched_dims || { echo "error: the AMX patches did not apply to $AMX_DIR" >&2; exit 1; }

# The default CPU backend, no BLAS, no GPU, no libcurl (the network is closed anyway), no
# server / examples we do not use; the main build is tuned to this machine (GGML_NATIVE=ON ->
# -march=native).
COMMON=(-DCMAKE_BUILD_TYPE=Release -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF
  -DGGML_METAL=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON
  -DBUILD_SHARED_LIBS=OFF)
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "== configuring $BUILD"
  cmake -S "$LLAMA" -B "$BUILD" "${COMMON[@]}" -DGGML_NATIVE=ON
fi
# llama-completion is the plain prompt-in, text-out tool (llama-cli now needs the server code,
# which we leave out); llama-perplexity --kl-divergence gives the fidelity goldens
# (tools/make_kl_goldens.py); llama-batched-bench measures batched decode (issue #15).
targets=(llama-bench llama-batched-bench llama-quantize llama-completion llama-perplexity)
echo "== building ${targets[*]} (-j$JOBS)"
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"

# A peer with some instructions off, for the A/B runs of bench/*.py --isa: build_variant DIR WHAT
# CMAKE_FLAGS... configures DIR once with GGML_NATIVE off and those flags (AVX2 + FMA + F16C +
# BMI2 and every AMX path off in both below), then builds the two benchmark tools.
build_variant() {
  local dir=$1 what=$2
  shift 2
  if [[ ! -f "$dir/CMakeCache.txt" ]]; then
    echo "== configuring $dir ($what)"
    cmake -S "$LLAMA" -B "$dir" "${COMMON[@]}" -DGGML_NATIVE=OFF \
      -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF \
      -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF "$@"
  fi
  echo "== building the $what llama-bench, llama-batched-bench (-j$JOBS)"
  cmake --build "$dir" -j"$JOBS" --target llama-bench llama-batched-bench
}

# The AVX2-only peer, every AVX-512 path off too, so that on an AVX-512 host `DEEPINFER_ISA=avx2`
# meets llama.cpp on equal instructions (issue #15).
BUILD_AVX2_DIR="$CACHE/avx2-build-$VERSION"
if [[ "$BUILD_AVX2" == 1 ]]; then
  build_variant "$BUILD_AVX2_DIR" "AVX2-only" -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF \
    -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
fi

# The build without AMX: AVX-512 F/BW/VL/DQ, VNNI, BF16 and VBMI as the native one has them, the
# peer of DEEPINFER_ISA=avx512 on an AMX host (issue #47).
BUILD_NOAMX_DIR="$CACHE/noamx-build-$VERSION"
if [[ "$BUILD_NOAMX" == 1 ]]; then
  build_variant "$BUILD_NOAMX_DIR" "no-AMX" -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON \
    -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
fi

# gguf-py from the same commit, so that scripts reading GGUF files agree with the binaries
# (tools/convert_to_gguf.py puts the vendored copy first on its path anyway).
want=$(sed -n 's/^version = "\(.*\)"/\1/p' "$LLAMA/gguf-py/pyproject.toml")
have=$("$PY" -c "import importlib.metadata as m; print(m.version('gguf'))" 2>/dev/null || true)
if [[ "$have" != "$want" ]]; then
  echo "== installing gguf-py $want from $LLAMA/gguf-py into .venv-tools"
  "$PY" -m pip install --no-deps "$LLAMA/gguf-py"
fi

echo "llama.cpp binaries: $BUILD/bin"
if [[ "$BUILD_AVX2" == 1 ]]; then echo "AVX2-only binaries: $BUILD_AVX2_DIR/bin"; fi
if [[ "$BUILD_NOAMX" == 1 ]]; then echo "no-AMX binaries: $BUILD_NOAMX_DIR/bin"; fi
echo "llama.cpp sources:  $LLAMA"
