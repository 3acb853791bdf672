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
        records = [json.loads(t) for t in trials]
        replayed = sum((r.get("agent_stats") or {}).get("replayed_replies", 0) for r in records)
        # With replay on, the fault episode takes the control's replies until the fault
        # shows: a pair that parted before it is a harness defect, not the model's noise.
        parted = [
            r["pair_id"]
            for r in records
            if (r.get("agent_config") or {}).get("replay") and r.get("prefix_equivalent") is False
        ]
        print(f"{run.name}: {replayed} replies replayed; pairs parted before the fault: {parted}")
        if len(trials) != args.expect or infra or parted:
            print(
                f"{run.name}: expected {args.expect} pairs, no infrastructure error and no "
                "pair parted before its fault"
            )
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
