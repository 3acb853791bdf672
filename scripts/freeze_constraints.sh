#!/usr/bin/env bash
# Freeze the versions that were tested into constraints/py3.X.txt, one file per Python:
# 3.11 from the dev venv (.venv, every extra), the others from the smoke venvs
# (build/smoke-py3.X). Run after a deliberate upgrade and a green `.ci/run`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p constraints
freeze() {  # freeze PYTHON VERSION
    local python="$1" v="$2"
    [ -x "$python" ] || { echo "skip $v: no $python"; return; }
    {
        echo "# The versions CI tested on Python $v: \`make setup\` and scripts/smoke_python.sh install with"
        echo "# \`pip install -c constraints/py$v.txt\`. Regenerate with \`make constraints\` after a"
        echo "# deliberate upgrade (it freezes the dev venv and the smoke venvs)."
        "$python" -m pip list --format=freeze --exclude-editable 2>/dev/null \
            | grep -v -E '^(pip|setuptools|wheel|undobench[-_]gym)=='
    } > "constraints/py$v.txt"
    echo "constraints/py$v.txt: $(grep -c '==' "constraints/py$v.txt") pins"
}
freeze .venv/bin/python 3.11
for v in 3.12 3.13; do freeze "build/smoke-py$v/bin/python" "$v"; done
