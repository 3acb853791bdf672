#!/usr/bin/env bash
# A real language model in the loop, as CI runs it: llama.cpp on the CPU serving
# SmolLM2-135M-Instruct (`--agent local:smollm2`: the sweep starts and stops the server),
# 4 TEST workflows x bare,B6 x 2 seeds, F1 (native tool calls, tool_choice auto) and F2
# (ReAct, JSON-schema constrained actions). Every pair must be recorded with no
# infrastructure error; the summary prints what the model did.
# Needs `make serve-setup`. Usage: scripts/real_model_sweep.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/real-model}
BIN=${BIN:-.venv/bin}
WORKFLOWS=pay-split-payout,db-pay-dividend,st-publish-build-artifact,git-cut-release
run() {  # framework, tool choice
  rm -rf "$OUT/$1"
  "$BIN/undobench" run --workflows "$WORKFLOWS" --scenarios lost-ack --method bare,B6 \
    --seeds 1-2 --agent local:smollm2 --framework "$1" --tool-choice "$2" \
    --max-steps 3 --trial-timeout 40 --out "$OUT/$1" --quiet
}
start=$(date +%s)
run F1 auto
run F2 required
"$BIN/python" scripts/real_model_summary.py --expect 16 "$OUT/F1" "$OUT/F2"
echo "real-model sweep: $(( $(date +%s) - start )) s"
