"""Do two runs of the same pairs give the same verdicts? (Faster must not mean different.)

    python benchmarks/compare_runs.py OLD_RUN_DIR NEW_RUN_DIR [--json]

Matches the pairs both runs recorded by pair id and compares, for the control and the fault
episode, everything a verdict rests on: success, finish status, truncation, the effect
counts, whether and how the fault fired, the final state's hash, and the whole transcript
(every action and every observation). Prints the number of pairs compared and every field
that differs, with up to five pair ids each; exit status 1 when any differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from undobench_gym.core.trials import read_trials
from undobench_gym.evaluation.study.verdicts import compare as compare_records


def compare(old: Path, new: Path) -> dict[str, Any]:
    return compare_records(read_trials(old / "trials.jsonl"), read_trials(new / "trials.jsonl"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = compare(args.old, args.new)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{result['compared']} pairs compared ({result['old_pairs']} old, "
            f"{result['new_pairs']} new, {result['skipped_infra_errors']} skipped for an "
            f"infrastructure error): {result['identical']} identical"
        )
        for field, d in result["differences"].items():
            print(f"  {field}: {d['pairs']} pairs differ, e.g. {', '.join(d['examples'])}")
    sys.exit(1 if result["differences"] else 0)


if __name__ == "__main__":
    main()
