"""Where one paired trial's time goes, phase by phase, with CPU time per process.

    python benchmarks/bench_pair.py [--pairs 20] [--runtime process] [--json]
    python benchmarks/bench_pair.py --workflow git-cut-release   # its own scenarios

Runs paired trials through the sweep's own worker (`TrialWorker.run`, the record written
by `TrialWriter`) for three kinds of scenario on one workflow: a crash point (the service
process dies mid-mutation and is restarted), a lost acknowledgement, and a pre-mutation
502 (with `--workflow`, every fault scenario of that workflow instead). Each phase is
timed *exclusively* (a phase nested in another is not counted twice):

  reset          the env's reset itself (episode bookkeeping, drawing the parameters)
  admin reset    the service's state reset over its admin API
  episode start  the proxy's episode and fault plan over its control API
  health         waiting for the stack to be healthy, restarts included
  agent          the agent choosing its actions
  call           an agent's call: client -> fault proxy -> service and back
  step           the env's step around the call (parsing, bookkeeping)
  state + commit log  the service's final state and commit log (one admin request)
  wire read      the proxy's wire log over the control API
  oracle         the verdict from state, commit log and wire
  record         building the trial record
  write          appending the record to trials.jsonl (fsync)
  harness        everything else in the worker's run of the pair

CPU seconds are read for the driver (this process), the service (its fork server and
every server process it forked, crashed ones included) and the proxy. Quote medians from
one run together.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from undobench_gym.core import env as env_module
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import pair_id
from undobench_gym.core.stack_client import StackClient
from undobench_gym.core.trials import TrialWriter
from undobench_gym.harness.executors.base import TrialTask
from undobench_gym.harness.executors.worker import GuardedAgent, TrialWorker

WORKFLOW = "st-publish-build-artifact"
DOMAIN = "storage"
SCENARIOS = {"crash point": "crash-after-parts", "lost ack": "lost-ack", "pre 502": "pre-502"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


class PhaseTimer:
    """Exclusive wall time per phase: a stack of open phases, each charged its own time
    minus the time of the phases opened inside it."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._stack: list[list[Any]] = []  # [name, start, time in nested phases]

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._stack.append([name, time.perf_counter(), 0.0])
        try:
            yield
        finally:
            _, start, nested = self._stack.pop()
            spent = time.perf_counter() - start
            self.totals[name] += spent - nested
            if self._stack:
                self._stack[-1][2] += spent

    def take(self) -> dict[str, float]:
        out, self.totals = dict(self.totals), defaultdict(float)
        return out


TIMER = PhaseTimer()


def timed(owner: Any, attr: str, name: str) -> None:
    original: Callable[..., Any] = getattr(owner, attr)

    def wrapper(*args: Any, **kw: Any) -> Any:
        with TIMER.phase(name):
            return original(*args, **kw)

    setattr(owner, attr, wrapper)


def instrument() -> None:
    timed(UndoBenchEnv, "reset", "reset")
    timed(UndoBenchEnv, "step", "step")
    timed(StackClient, "reset_state", "admin reset")
    timed(StackClient, "start_episode", "episode start")
    timed(StackClient, "send", "call")
    timed(StackClient, "final_state", "state + commit log")
    timed(StackClient, "wire", "wire read")
    timed(GuardedAgent, "act", "agent")
    timed(env_module, "evaluate", "oracle")
    timed(env_module, "episode_record", "record")
    timed(TrialWriter, "write", "write")
    timed(TrialWorker, "run", "harness")
    from undobench_gym.core.runtime import docker, process

    timed(process.ProcessRuntime, "wait_healthy", "health")
    timed(docker.DockerRuntime, "wait_healthy", "health")


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def cpu_of(pid: int) -> float:
    """CPU seconds of `pid`, with its children's (reaped or live): a fork server's
    zygote, the servers it forked and the crashed ones it reaped."""
    fields = _stat(pid)
    if not fields:
        return 0.0
    total = sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in task.read_text().split():
            total += cpu_of(int(child))
    return total


def cpu_snapshot(worker: TrialWorker) -> dict[str, float]:
    t = os.times()
    snap = {"driver": t.user + t.system}
    for pool in worker.pools.values():
        for env in pool.envs.values():
            rt: Any = env.runtime
            for role, child in (("service", rt._service), ("proxy", rt._proxy)):
                if child.proc is not None:
                    snap[role] = snap.get(role, 0.0) + cpu_of(child.proc.pid)
    return snap


def run_kind(
    worker: TrialWorker,
    writer: TrialWriter,
    scenario: str,
    pairs: int,
    runtime: str,
    workflow: str = WORKFLOW,
    domain: str = DOMAIN,
) -> dict[str, Any]:
    walls: list[float] = []
    phases: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, float] = defaultdict(float)
    for seed in range(1, pairs + 1):
        task = TrialTask(
            pair_id=pair_id(workflow, scenario, "bare", seed, "scripted") + f"-{time.time_ns()}",
            workflow=workflow,
            domain=domain,
            scenario=scenario,
            method="bare",
            seed=seed,
            agent="scripted",
            framework=None,
            runtime=runtime,
            max_steps=30,
        )
        before = cpu_snapshot(worker)
        t0 = time.perf_counter()
        out = worker.run(task, attempt=1)
        if out.record is None:
            raise SystemExit(f"pair failed: {out.error_kind}: {out.error}")
        out.record["pair_id"] = task.pair_id
        writer.write(out.record)  # timed as "write" by instrument()
        walls.append(time.perf_counter() - t0)
        after = cpu_snapshot(worker)
        for k, v in after.items():
            # a restarted child starts from 0: count only growth of the same process
            cpu[k] += max(0.0, v - before.get(k, 0.0))
        for k, v in TIMER.take().items():
            phases[k].append(v)
    n = len(walls)
    return {
        "pairs": n,
        "median_pair_ms": round(statistics.median(walls) * 1000, 1),
        "phases_median_ms": {
            k: round(statistics.median(v) * 1000, 2)
            for k, v in sorted(phases.items(), key=lambda kv: -statistics.median(kv[1]))
        },
        "cpu_ms_per_pair": {k: round(v / n * 1000, 1) for k, v in sorted(cpu.items())},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=20, help="pairs per scenario kind")
    p.add_argument("--runtime", default="process", choices=["process", "docker"])
    p.add_argument("--workflow", default=WORKFLOW, help="profile this workflow's scenarios")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    workflow, domain, scenarios = args.workflow, DOMAIN, SCENARIOS
    if workflow != WORKFLOW:
        spec = find_workflow(workflow)
        domain = spec.domain
        scenarios = {s.id: s.id for s in spec.scenarios}
    instrument()
    worker = TrialWorker("bench", max_stacks=1, trial_timeout=None)
    results: dict[str, Any] = {"runtime": args.runtime, "workflow": workflow}
    with tempfile.TemporaryDirectory(prefix="bench-pair-") as tmp:
        writer = TrialWriter(Path(tmp) / "trials.jsonl")
        try:
            warm = next(iter(scenarios.values()))
            run_kind(worker, writer, warm, 2, args.runtime, workflow, domain)  # warm-up
            for kind, scenario in scenarios.items():
                results[kind] = run_kind(
                    worker, writer, scenario, args.pairs, args.runtime, workflow, domain
                )
        finally:
            writer.close()
            worker.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.runtime} runtime, {workflow}, scripted agent, method bare")
    for kind in scenarios:
        r = results[kind]
        print(f"\n{kind}: {r['pairs']} pairs, median {r['median_pair_ms']} ms per pair")
        for phase, ms in r["phases_median_ms"].items():
            print(f"  {phase:<14} {ms:8.2f} ms")
        cpu = ", ".join(f"{k} {v} ms" for k, v in r["cpu_ms_per_pair"].items())
        print(f"  CPU per pair: {cpu}")


if __name__ == "__main__":
    main()
