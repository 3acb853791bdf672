"""Sweep throughput: one scripted sweep run with 1, 2 and 4 local workers, and through Ray.

    python benchmarks/bench_sweep.py [--seeds 1-3] [--workers 1,2,4] [--no-ray] [--json]

For each configuration: the wall time of the whole sweep (worker and stack start-up and
the report included) and the steady rate (paired trials per second between the first and
the last recorded pair, start-up excluded), each with its ratio to one worker. The sweep
spans four domains, so workers have different stacks to own. Quote the figures of one run
together: the machine is shared, and N workers cannot go faster than the cores they get.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from undobench_gym.harness.runner import expand, parse_seeds, run_sweep

WORKFLOWS = ["pay-charge-customer", "db-create-order", "st-register-dataset", "git-update-config"]
METHODS = ["bare", "B0"]


def measure(executor: str, workers: int, seeds: list[int]) -> dict[str, Any]:
    trials = expand(WORKFLOWS, None, METHODS, seeds)
    stamps: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        t0 = time.monotonic()
        run_sweep(
            trials,
            agent_spec="scripted",
            runtime="process",
            out=Path(tmp),
            progress=False,
            executor=executor,
            workers=workers,
            on_trial=lambda _r: stamps.append(time.monotonic()),
        )
        wall = time.monotonic() - t0
    steady = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else None
    return {
        "executor": executor,
        "workers": workers,
        "pairs": len(trials),
        "wall_s": round(wall, 2),
        "pairs_per_s_wall": round(len(trials) / wall, 3),
        "pairs_per_s_steady": None if steady is None else round(steady, 3),
        "first_pair_after_s": round(stamps[0] - t0, 2) if stamps else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="1-3", help="seeds per (workflow, scenario, method)")
    p.add_argument("--workers", default="1,2,4", help="local worker counts to measure")
    p.add_argument("--no-ray", action="store_true", help="skip the Ray measurement")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args()
    seeds = parse_seeds(args.seeds)
    counts = [int(w) for w in args.workers.split(",")]
    rows = [measure("local", w, seeds) for w in counts]
    if not args.no_ray and importlib.util.find_spec("ray") is not None:
        rows.append(measure("ray", max(counts), seeds))
    base = next((r for r in rows if r["executor"] == "local" and r["workers"] == 1), rows[0])
    for r in rows:
        r["wall_ratio_vs_1"] = round(r["pairs_per_s_wall"] / base["pairs_per_s_wall"], 2)
        if r["pairs_per_s_steady"] and base["pairs_per_s_steady"]:
            r["steady_ratio_vs_1"] = round(r["pairs_per_s_steady"] / base["pairs_per_s_steady"], 2)
    result = {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2), "rows": rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{rows[0]['pairs']} pairs ({', '.join(WORKFLOWS)} x every scenario x {METHODS});")
    print(f"{result['cpus']} CPUs, load average {result['load_avg_1m']} at the end")
    head = f"{'executor':<8} {'workers':>7} {'wall s':>8} {'pairs/s':>8} {'ratio':>6}"
    print(head + f" {'steady/s':>9} {'ratio':>6} {'1st pair s':>10}")
    for r in rows:
        print(
            f"{r['executor']:<8} {r['workers']:>7} {r['wall_s']:>8.1f} "
            f"{r['pairs_per_s_wall']:>8.2f} {r['wall_ratio_vs_1']:>6.2f} "
            f"{r['pairs_per_s_steady'] or 0:>9.2f} {r.get('steady_ratio_vs_1', 0):>6.2f} "
            f"{r['first_pair_after_s']:>10.1f}"
        )


if __name__ == "__main__":
    main()
