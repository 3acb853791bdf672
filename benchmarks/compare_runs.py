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
from collections import defaultdict
from pathlib import Path
from typing import Any

from undobench_gym.trials import read_trials

FIELDS = ("success", "finish_status", "truncated", "effects", "fault_fired", "state_hash")


def verdict(episode: dict[str, Any]) -> dict[str, Any]:
    out = {f: episode.get(f) for f in FIELDS}
    outcome = episode.get("fault_outcome") or {}
    out["fault_outcome"] = {k: outcome.get(k) for k in ("as_planned", "mechanism", "coin")}
    out["actions"] = [t["action"] for t in episode.get("transcript", [])]
    out["observations"] = [t["observation"] for t in episode.get("transcript", [])]
    return out


def compare(old: Path, new: Path) -> dict[str, Any]:
    a = {r["pair_id"]: r for r in read_trials(old / "trials.jsonl")}
    b = {r["pair_id"]: r for r in read_trials(new / "trials.jsonl")}
    common = sorted(a.keys() & b.keys())
    errors = [
        p for p in common if any(a[p][x]["error"] or b[p][x]["error"] for x in ("control", "fault"))
    ]
    diffs: dict[str, list[str]] = defaultdict(list)
    for pid in common:
        if pid in errors:
            continue
        for arm in ("control", "fault"):
            va, vb = verdict(a[pid][arm]), verdict(b[pid][arm])
            for key in va:
                if va[key] != vb[key]:
                    diffs[f"{arm}.{key}"].append(pid)
    return {
        "old_pairs": len(a),
        "new_pairs": len(b),
        "compared": len(common) - len(errors),
        "skipped_infra_errors": len(errors),
        "identical": len(common) - len(errors) - len({p for ps in diffs.values() for p in ps}),
        "differences": {k: {"pairs": len(v), "examples": v[:5]} for k, v in sorted(diffs.items())},
    }


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
