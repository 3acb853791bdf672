"""Lanes: pairs in flight per worker process, with and without time spent waiting.

    python benchmarks/bench_lanes.py [--seeds 1-4] [--lanes 1,2,4] [--think-ms 0,100] [--json]

Runs one sub-sweep (the TEST split's workflows, every scenario, methods bare and B2) with
2 local workers and each lane count, for the scripted agent as is (`--think-ms 0`: all
CPU, what the scripted factorial is) and for the scripted agent waiting a fixed time
before each action (a stand-in for a model server's latency: the case lanes are for).
Prints wall time, the machine's busy CPU per pair (run it on an otherwise idle machine),
and each wall time's ratio to one lane at the same think time. Quote one run's figures
together.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import all_workflows
from undobench_gym.harness.runner import expand, parse_seeds, run_sweep

METHODS = ["bare", "B2"]
THINK_ENV = "UNDOBENCH_BENCH_THINK_MS"


class ThinkingAgent(ScriptedAgent):
    """The gold plan, each action after `UNDOBENCH_BENCH_THINK_MS` of waiting."""

    name = "scripted-thinking"

    def act(self, observation: str) -> dict[str, Any]:
        time.sleep(float(os.environ.get(THINK_ENV, "0")) / 1000)
        return super().act(observation)


def _cpu() -> float:
    """Busy CPU seconds of the whole machine (`/proc/stat`): a closed stack is SIGKILLed,
    and its forked servers' time never reaches this process's `RUSAGE_CHILDREN`."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def measure(lanes: int, think_ms: int, seeds: list[int]) -> dict[str, Any]:
    """One sweep, in a child process so that each starts from the same clean state."""
    trials = expand([w.id for w in all_workflows("test")], None, METHODS, seeds)
    os.environ[THINK_ENV] = str(think_ms)
    agent = "scripted" if think_ms == 0 else "python:bench_lanes:ThinkingAgent"
    with tempfile.TemporaryDirectory(prefix="bench-lanes-") as tmp:
        c0, t0 = _cpu(), time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run_sweep(trials, agent_spec=agent, runtime="process", out=Path(tmp),
                          progress=False, report=False, workers=2, lanes=lanes)  # fmt: skip
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        wall, cpu = time.monotonic() - t0, _cpu() - c0
        if status != 0:
            raise SystemExit(f"the sweep with {lanes} lanes failed (status {status})")
    return {
        "think_ms": think_ms,
        "lanes": lanes,
        "pairs": len(trials),
        "wall_s": round(wall, 1),
        "cpu_ms_per_pair": round(1000 * cpu / len(trials), 1),
        "cpu_busy": round(cpu / wall / (os.cpu_count() or 1), 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="1-4")
    p.add_argument("--lanes", default="1,2,4")
    p.add_argument("--think-ms", default="0,100")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    seeds = parse_seeds(args.seeds)
    rows = [
        measure(lanes, think, seeds)
        for think in (int(t) for t in args.think_ms.split(","))
        for lanes in (int(n) for n in args.lanes.split(","))
    ]
    for r in rows:
        one = next(o for o in rows if o["think_ms"] == r["think_ms"] and o["lanes"] == 1)
        r["wall_ratio_vs_1_lane"] = round(one["wall_s"] / r["wall_s"], 2)
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=2))
        return
    print(f"{rows[0]['pairs']} pairs, 2 workers, {os.cpu_count()} CPUs")
    print(f"{'think ms':>8} {'lanes':>5} {'wall s':>7} {'x 1 lane':>8} {'CPU ms/pair':>11} busy")
    for r in rows:
        print(
            f"{r['think_ms']:>8} {r['lanes']:>5} {r['wall_s']:>7.1f} "
            f"{r['wall_ratio_vs_1_lane']:>8.2f} {r['cpu_ms_per_pair']:>11.1f} {r['cpu_busy']:>5.2f}"
        )


if __name__ == "__main__":
    main()
