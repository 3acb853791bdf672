#!/usr/bin/env bash
# Freeze the versions that were tested into constraints/py3.X.txt, one file per Python, each
# from a venv with every extra: 3.11 from the dev venv (.venv), 3.12 and 3.13 from
# build/full-py3.X, which this script builds from the source tree (resolved afresh, so an
# upgrade is picked up; about 4 minutes and 12 GB each: the registry's torch on 3.12+ is a
# CUDA build). It checks each venv with `pip check` before freezing it. Run after a
# deliberate upgrade and a green `.ci/run`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# Every extra: the full development environment, the GPU server's included.
EXTRAS="eval,dev,docker,llm,vllm,ray,train,plots,rl,mcp,serve,serve-python"
WHEELS="${UNDOBENCH_WHEELS:-$HOME/.cache/undobench/wheels}"  # llama-cpp-python, built once
mkdir -p constraints build
full_venv() {  # full_venv VERSION -> build/full-pyVERSION with every extra
    local v="$1" py
    py="$(command -v "python$v" || ls "$(pyenv root 2>/dev/null)"/versions/"$v"*/bin/"python$v" 2>/dev/null | head -1 || true)"
    [ -n "$py" ] || { echo "skip $v: no python$v"; return 1; }
    rm -rf "build/full-py$v" build/full-src
    mkdir -p build/full-src && git archive HEAD | tar -x -C build/full-src
    "$py" -m venv "build/full-py$v"
    "build/full-py$v/bin/pip" install --quiet -U pip
    "build/full-py$v/bin/pip" install --quiet --find-links "$WHEELS" "./build/full-src[$EXTRAS]"
}
freeze() {  # freeze PYTHON VERSION
    local python="$1" v="$2"
    [ -x "$python" ] || { echo "skip $v: no $python"; return; }
    "$python" -m pip check
    {
        echo "# The versions CI tested on Python $v: \`make setup\` and scripts/smoke_python.sh install with"
        echo "# \`pip install -c constraints/py$v.txt\`. Regenerate with \`make constraints\` after a"
        echo "# deliberate upgrade (scripts/freeze_constraints.sh: a venv with every extra, pip check clean)."
        "$python" -m pip list --format=freeze --exclude-editable 2>/dev/null \
            | grep -v -E '^(pip|setuptools|wheel|undobench[-_]gym)=='
    } > "constraints/py$v.txt"
    echo "constraints/py$v.txt: $(grep -c '==' "constraints/py$v.txt") pins"
}
freeze .venv/bin/python 3.11
for v in 3.12 3.13; do
    if full_venv "$v"; then freeze "build/full-py$v/bin/python" "$v"; fi
done
