#!/usr/bin/env bash
# Builds upstream llama.cpp's `llama-server` (C++) once from the llama.cpp tree that the
# llama-cpp-python source distribution vendors (PyPI is the only source reachable here), and
# keeps the binary in $DEST (default ~/.cache/undobench/llama-server-VERSION). About 10 min
# on 2 cores; a kept binary makes this a no-op. Built for x86-64-v3 (AVX2, FMA, F16C) rather
# than -march=native, so the kept binary runs on any machine of this kind.
# Usage: scripts/build_llama_server.sh [VERSION]   (prints the binary's path)
set -euo pipefail
VERSION=${1:-0.3.36}
DEST=${DEST:-$HOME/.cache/undobench/llama-server-$VERSION}
PY=${PY:-python3}
if [[ -x "$DEST/bin/llama-server" ]]; then
  echo "$DEST/bin/llama-server"
  exit 0
fi
work=$(mktemp -d /tmp/undobench-llama-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
sdist=${LLAMA_SDIST:-}
if [[ -z "$sdist" ]]; then
  "$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" \
    -d "$work" >&2
  sdist=$(ls "$work"/llama_cpp_python-"$VERSION".tar.gz)
fi
tar -xzf "$sdist" -C "$work"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON >&2
cmake --build "$work/build" --target llama-server -j "$(nproc)" >&2
mkdir -p "$DEST/bin"
install -m 0755 "$work/build/bin/llama-server" "$DEST/bin/llama-server.tmp"
mv "$DEST/bin/llama-server.tmp" "$DEST/bin/llama-server"
echo "$DEST/bin/llama-server"
