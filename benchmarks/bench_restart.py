"""Crash restarts: from a real crash point to the service answering again, fork server vs
a new interpreter, on each runtime, measured in one run.

    python benchmarks/bench_restart.py [--crashes 50] [--runtimes process,docker] [--json]

Each sample is one fault episode of `pay-split-payout` under `crash-mid-batch` (the
service process exits for real in the middle of its batch) driven by the scripted agent.
The clock starts when the agent's call comes back with the connection reset and stops when
the env's health probe (admin API and proxy control API both answering) returns: the
time a crash adds before the episode can go on. `exec` is the old path (a new Python
process that imports FastAPI, SQLAlchemy and the domain; on docker, the container exits
and is started again); `fork` is the default (the service's zygote forks a new server).
Every sample is checked to be one planned restart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import httpx

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode
from undobench_gym.core.stack_client import StackClient

WORKFLOW, SCENARIO = "pay-split-payout", "crash-mid-batch"


class CrashClock:
    """Starts at a call that ends in a transport error; stops when the next health probe
    succeeds."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.samples: list[float] = []

    def install(self, env: UndoBenchEnv) -> None:
        client: StackClient = env._stack
        send, rt = client.send, env.runtime
        wait = rt.wait_healthy

        def timed_send(req: Any) -> httpx.Response:
            try:
                return send(req)
            except httpx.TransportError:
                self.started = time.perf_counter()
                raise

        def timed_wait(timeout: float = 30.0, probe: bool = False) -> None:
            wait(timeout=timeout, probe=probe)
            if probe and self.started is not None:
                self.samples.append((time.perf_counter() - self.started) * 1000)
                self.started = None

        client.send = timed_send  # type: ignore[method-assign]
        rt.wait_healthy = timed_wait  # type: ignore[method-assign]


def measure(runtime: str, mode: str, crashes: int) -> dict[str, Any]:
    os.environ["UNDOBENCH_SERVICE_RESTART"] = mode
    clock = CrashClock()
    agent = ScriptedAgent()
    with UndoBenchEnv("payments", runtime=runtime) as env:
        clock.install(env)
        for seed in range(1, crashes + 1):
            before = (env.runtime.restarts, env.runtime.unplanned_exits)
            record = run_episode(env, agent, seed=seed, workflow=WORKFLOW, fault=SCENARIO)
            after = (env.runtime.restarts, env.runtime.unplanned_exits)
            if not record["fault_fired"] or after != (before[0] + 1, before[1]):
                raise SystemExit(f"{runtime}/{mode} seed {seed}: not one planned restart")
    s = clock.samples
    if len(s) != crashes:
        raise SystemExit(f"{runtime}/{mode}: {len(s)} samples for {crashes} crashes")
    return {
        "runtime": runtime,
        "mode": mode,
        "crashes": len(s),
        "median_ms": round(statistics.median(s), 1),
        "p90_ms": round(statistics.quantiles(s, n=10)[-1], 1),
        "max_ms": round(max(s), 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--crashes", type=int, default=50)
    p.add_argument("--runtimes", default="process,docker")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = [
        measure(rt, mode, args.crashes)
        for rt in args.runtimes.split(",")
        for mode in ("exec", "fork")
    ]
    for rt in args.runtimes.split(","):
        old, new = (
            next(r for r in rows if r["runtime"] == rt and r["mode"] == m) for m in ("exec", "fork")
        )
        new["speedup"] = round(old["median_ms"] / new["median_ms"], 1)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"crash point -> service answering, {WORKFLOW}/{SCENARIO}, {args.crashes} crashes each")
    print(
        f"{'runtime':<8} {'mode':<5} {'median ms':>10} {'p90 ms':>8} {'max ms':>8} {'speed-up':>9}"
    )
    for r in rows:
        up = f"{r['speedup']}x" if "speedup" in r else ""
        print(
            f"{r['runtime']:<8} {r['mode']:<5} {r['median_ms']:>10} {r['p90_ms']:>8} "
            f"{r['max_ms']:>8} {up:>9}"
        )


if __name__ == "__main__":
    main()
