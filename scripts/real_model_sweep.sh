#!/usr/bin/env bash
# A real language model in the loop, as CI runs it: upstream llama-server on the CPU (the
# sweep starts and stops it: `--agent local:MODEL`).
#  1. SmolLM2-135M-Instruct: 2 TEST workflows x bare,B6 x seed 1, F2 (ReAct, JSON-schema
#     constrained actions): the harness with a model that produces real garbage. (Its chat
#     template has no tools, so llama-server offers it none in F1: F1 runs on Qwen.)
#  2. Qwen2.5-Coder-1.5B-Instruct (22 part packages, `undobench models verify`): one paired
#     trial of a task it can do, F1, temperature 0.
# Every pair must be recorded with no infrastructure error; the summary prints what the
# models did. Needs `make serve-setup`. Usage: scripts/real_model_sweep.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/real-model}
BIN=${BIN:-.venv/bin}
WORKFLOWS=pay-split-payout,db-pay-dividend
run() {  # framework, tool choice
  rm -rf "$OUT/$1"
  "$BIN/undobench" run --workflows "$WORKFLOWS" --scenarios lost-ack --method bare,B6 \
    --seeds 1 --agent local:smollm2 --framework "$1" --tool-choice "$2" \
    --max-steps 3 --trial-timeout 40 --out "$OUT/$1" --quiet
}
start=$(date +%s)
run F2 required
rm -rf "$OUT/qwen"
"$BIN/undobench" run --workflows pay-charge-customer --scenarios lost-ack --method bare \
  --seeds 1 --agent local:qwen2.5-coder-1.5b --framework F1 --max-steps 6 \
  --trial-timeout 400 --out "$OUT/qwen" --quiet
"$BIN/python" scripts/real_model_summary.py --expect 4 "$OUT/F2"
"$BIN/python" scripts/real_model_summary.py --expect 1 "$OUT/qwen"
echo "real-model sweep: $(( $(date +%s) - start )) s"
