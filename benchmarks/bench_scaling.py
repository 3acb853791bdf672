"""Scaling with workers: the TEST factorial (scripted agent, process runtime, every method)
run with each worker count, its phases, and the schedule simulator's prediction beside it.

    python benchmarks/bench_scaling.py [--workers 1,2,3] [--seeds 1-4] \
        [--reference 2] [--predict 8,16 --cores 16] [--keep DIR [--reuse]] [--json]

For each worker count W, from the run's own `run_meta.json` (`executors.timeline`):
wall time to the last pair, start-up (until every worker was at work on its first pair),
steady state, tail (from the first worker out of work), the CPU time of everything the
sweep ran, per pair, and the cores it kept busy. Then `harness.simulate` replays one of
these runs (`--reference`, default the largest W that fits this machine's cores) for every
measured W, with the error against the measured wall, and for `--predict` workers on a
`--cores` machine. Run it with nothing else on the cores; quote the figures of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from undobench_gym.agents.methods import METHODS
from undobench_gym.core.catalog import all_workflows
from undobench_gym.harness.runner import expand, parse_seeds, run_sweep
from undobench_gym.harness.simulate import calibrated, model_from_run, simulate


def measure(workers: int, seeds: list[int], out: Path, reuse: bool = False) -> dict[str, Any]:
    if not (reuse and (out / "run_meta.json").exists()):
        shutil.rmtree(out, ignore_errors=True)
        trials = expand([w.id for w in all_workflows("test")], None, list(METHODS), seeds)
        run_sweep(
            trials,
            agent_spec="scripted",
            runtime="process",
            out=out,
            progress=False,
            report=False,
            workers=workers,
        )
    session = json.loads((out / "run_meta.json").read_text())["sessions"][-1]
    ph = session["phases"]
    return {
        "workers": workers,
        "pairs": session["written"],
        "session_wall_s": session["wall_s"],
        "wall_s": ph["wall_s"],
        "startup_s": ph["startup_s"],
        "steady_s": ph["steady_s"],
        "tail_s": ph["tail_s"],
        "pairs_per_s": round(session["written"] / ph["wall_s"], 2),
        "cpu_s": session["cpu_s"],
        "cpu_per_pair_s": session["cpu_per_pair_s"],
        "cores_busy": session["cores_busy"],
        "stacks_started": sum(w["stacks_started"] for w in ph["workers"]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,3")
    p.add_argument("--seeds", default="1-4")
    p.add_argument(
        "--reference",
        type=int,
        default=None,
        help="the run the simulator replays (default: the largest W > 1 within this machine's "
        "cores, calibrated on the W=1 run when there is one)",
    )
    p.add_argument("--predict", default="8,16", help="worker counts to predict")
    p.add_argument("--cores", type=int, default=16, help="the predicted machine's cores")
    p.add_argument("--keep", type=Path, default=None, help="keep the runs in this directory")
    p.add_argument(
        "--reuse", action="store_true", help="with --keep: print from the runs already there"
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    here = os.cpu_count() or 1
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    rows = []
    for w in counts:
        rows.append(measure(w, parse_seeds(args.seeds), root / f"w{w}", args.reuse))
        r = rows[-1]
        print(
            f"W={w}: {r['pairs']} pairs, wall {r['wall_s']} s (start-up {r['startup_s']}, "
            f"steady {r['steady_s']}, tail {r['tail_s']}), {r['pairs_per_s']} pairs/s, "
            f"CPU {r['cpu_per_pair_s']} s/pair, {r['cores_busy']} cores busy, "
            f"{r['stacks_started']} stack starts",
            flush=True,
        )
    ref = args.reference or max(w for w in counts if 1 < w <= here)
    if 1 in counts and ref != 1:  # calibrated: uncontended work, the cores really given
        model = calibrated(root / f"w{ref}", root / "w1", cores=here)
    else:
        model = model_from_run(root / f"w{ref}", cores=here)
    checks = []
    for r in rows:
        sim = simulate(model, r["workers"])
        err = (sim["wall_s"] - r["wall_s"]) / r["wall_s"]
        checks.append({"workers": r["workers"], "measured_s": r["wall_s"], **sim, "error": err})
    # The bigger machine at this one's efficiency (effective cores per core), and ideal.
    efficiency = (model.effective_cores or here) / here
    target = args.cores * efficiency
    counts_ahead = [2, *(int(w) for w in args.predict.split(","))]
    predictions = [
        {**simulate(model, w, target), "ideal_wall_s": simulate(model, w, args.cores)["wall_s"]}
        for w in counts_ahead
    ]
    two = predictions[0]["wall_s"]
    if args.json:
        print(json.dumps({"runs": rows, "checks": checks, "predictions": predictions}, indent=2))
    else:
        print(
            f"\nsimulator replaying W={ref} (u = {model.u:.2f} cores per busy worker, "
            f"{model.effective_cores or here:.2f} effective cores of {here}):"
        )
        print("| W | measured wall s | predicted s | error | contention |")
        print("|---|---|---|---|---|")
        for c in checks:
            print(
                f"| {c['workers']} | {c['measured_s']} | {c['wall_s']} | {c['error']:+.1%} | "
                f"{c['contention']} |"
            )
        print(
            f"\npredicted on {args.cores} cores (same pairs; at this machine's efficiency, "
            f"{target:.1f} effective cores, and ideal):"
        )
        print("| W | wall s | x 2 workers | ideal wall s | start-up s | tail s | stack starts |")
        print("|---|---|---|---|---|---|---|")
        for pr in predictions:
            print(
                f"| {pr['workers']} | {pr['wall_s']} | {two / pr['wall_s']:.2f} | "
                f"{pr['ideal_wall_s']} | {pr['startup_s']} | {pr['tail_s']} | "
                f"{pr['stacks_started']} |"
            )
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
