"""Stacks forked from zygotes on and off, alternated in one session: the scripted TEST sweep's
wall time, start-up, the seconds pairs waited for stack starts, and CPU per pair.

    .venv/bin/python benchmarks/bench_warm_stacks.py [--workers 2] [--seeds 1-2] [--rounds 2]

Each round runs the sweep with `UNDOBENCH_WARM_STACKS=0` and then `=1` (the order flips
every round, so a machine that drifts slower does not favour one arm); medians per arm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from undobench_gym.agents.methods import METHODS
from undobench_gym.core.catalog import all_workflows
from undobench_gym.harness.runner import expand, parse_seeds, run_sweep


def run(workers: int, seeds: list[int], warm: bool, out: Path) -> dict[str, Any]:
    os.environ["UNDOBENCH_WARM_STACKS"] = "1" if warm else "0"
    shutil.rmtree(out, ignore_errors=True)
    trials = expand([w.id for w in all_workflows("test")], None, list(METHODS), seeds)
    run_sweep(trials, agent_spec="scripted", runtime="process", out=out, progress=False,
              report=False, workers=workers)  # fmt: skip
    session = json.loads((out / "run_meta.json").read_text())["sessions"][-1]
    ph = session["phases"]
    return {
        "warm": warm,
        "wall_s": ph["wall_s"],
        "startup_s": ph["startup_s"],
        "stack_wait_s": round(sum(w["stack_start_s"] for w in ph["workers"]), 1),
        "stacks": sum(w["stacks_started"] for w in ph["workers"]),
        "cpu_per_pair_s": session["cpu_per_pair_s"],
        "pairs": session["written"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seeds", default="1-2")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-warm-"))
    rows = []
    try:
        for r in range(args.rounds):
            for warm in (False, True) if r % 2 == 0 else (True, False):
                rows.append(run(args.workers, parse_seeds(args.seeds), warm, root / "run"))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nworkers {args.workers}, seeds {args.seeds}, {args.rounds} rounds (medians):")
    print("| zygotes | wall s | start-up s | waited on stack starts, s | CPU per pair s |")
    print("|---|---|---|---|---|")
    for warm in (False, True):
        arm = [x for x in rows if x["warm"] is warm]
        med = {
            k: statistics.median(x[k] for x in arm)
            for k in ("wall_s", "startup_s", "stack_wait_s", "cpu_per_pair_s")
        }
        print(f"| {'on' if warm else 'off'} | {med['wall_s']:.1f} | {med['startup_s']:.2f} | "
              f"{med['stack_wait_s']:.1f} | {med['cpu_per_pair_s']:.4f} |")  # fmt: skip


if __name__ == "__main__":
    main()
