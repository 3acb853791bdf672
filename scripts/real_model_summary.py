"""Print what a real model did in each run directory, and fail unless every pair was
recorded with no infrastructure error (CI's check on the real-model sweep)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("runs", nargs="+", type=Path, help="run directories (with summary.json)")
    p.add_argument("--expect", type=int, required=True, help="pairs each run must record")
    args = p.parse_args()
    ok = True
    for run in args.runs:
        summary = json.loads((run / "summary.json").read_text())
        trials = (run / "trials.jsonl").read_text().splitlines()
        o, b = summary["overall"], summary["agent_behaviour"]
        infra = o["infra_errors"]
        print(
            f"{run.name}: {len(trials)} trials recorded, infrastructure errors = {infra}, "
            f"schema-valid actions {b['valid_actions']}/{b['actions']} "
            f"({b['valid_action_rate']}), control successes {b['control_success']}, "
            f"median {b['turns_per_episode_median']} turns an episode, "
            f"{b.get('completion_tokens')} tokens out in {b.get('requests')} requests, "
            f"median {b['seconds_per_pair_median']} s a pair"
        )
        if len(trials) != args.expect or infra:
            print(f"{run.name}: expected {args.expect} pairs and no infrastructure error")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
