"""Predict a sweep's wall time for W workers before having the cores: replay one measured
run's pairs through the sweep's own scheduler on a virtual clock.

From the run (`timeline.jsonl` and `run_meta.json`) the model takes:
- each pair's work (`wall_s` less its stack start), divided by the run's own CPU
  contention, so that it is what one worker with a core to itself would take;
- what starting a stack costs: a worker's first (a worker process's is started before
  its pair comes and counts its whole start, forked from the driver's zygotes where the
  run had them; one worker in the driver starts new interpreters), and each later one by
  domain (median; forked from zygotes, `core.runtime.warm`, where the run had them);
- what starting a worker costs: its process (none for one worker, which runs in the
  driver) and what its first pair spends beyond the usual loading code and catalogue;
- `u`, the cores one busy worker keeps busy (the run's CPU time over its busy time).

A pair that starts while B workers are busy (itself included) on C cores runs
`max(1, B·u/C)` times slower (the cores shared evenly); the schedule is `Scheduler`'s,
with each worker's stacks held as `StackPool` holds them (LRU, `max_stacks`), and a worker
process's first stack waited only for what outlasts its loading. What it
leaves out: the driver's own CPU beyond `u`, memory, and other load on the machine.

    python -m undobench_gym.harness.simulate RUN_DIR --workers 1,2,3,8,16 [--cores 16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from undobench_gym.evaluation.run_meta import META_FILE
from undobench_gym.harness.executors import DEFAULT_MAX_STACKS
from undobench_gym.harness.executors.base import StackKey, TrialTask
from undobench_gym.harness.executors.schedule import STARTED_S, Scheduler
from undobench_gym.harness.executors.timeline import Attempt, read_timeline


@dataclass(frozen=True)
class RunModel:
    tasks: list[TrialTask]
    work_s: dict[str, float]  # per pair, one uncontended worker
    stack_s: dict[str, float]  # per domain, a worker's later starts
    spawn_s: float  # a worker process's start, before its first pair reaches it
    handoff_s: float
    u: float
    warmup_s: float = 0.0  # what a worker's first pair spends beyond the usual (loading)
    #: The cores the measured machine gave the sweep: fewer than it has where a second
    #: busy worker slows the first before the cores are all busy (a VM's steal, shared
    #: caches, the disk). Known when the model was calibrated on a one-worker run.
    effective_cores: float | None = None
    #: A worker's first stack start (a worker process's: forked from the driver's
    #: zygotes where the run had them, else new interpreters); None: as its domain's later
    #: starts (a run from before they were kept apart).
    first_stack_s: float | None = None
    #: The first stack start of one worker in the driver (new interpreters: it has no
    #: zygotes yet); None: as a worker process's.
    driver_first_stack_s: float | None = None
    #: Interpreters the driver starts beside its worker processes (its shared zygotes),
    #: whose imports share the cores with the workers' own as they start.
    zygotes: int = 0

    def starting(self, workers: int, cores: float) -> float:
        return starting(workers, self.zygotes, cores)

    def stack_cost(self, key: StackKey) -> float:
        """A later start of this stack (the median of other domains' where the run had
        none of this one's, else a first start's)."""
        if self.stack_s:
            default = statistics.median(self.stack_s.values())
        else:
            default = self.first_stack_s or 2.0
        return self.stack_s.get(key[0], default)


def starting(workers: int, zygotes: int, cores: float) -> float:
    """How much slower a worker process starts when `workers` start at once on `cores`
    beside the driver's `zygotes` (an interpreter importing keeps a core busy)."""
    return max(1.0, (workers + zygotes) / cores)


def contention(workers: int, u: float, cores: float) -> float:
    """How much slower each worker runs when `workers` share `cores`."""
    return max(1.0, workers * u / cores)


def model_from_run(run_dir: Path, cores: int | None = None, session: int = -1) -> RunModel:
    """The model of one session of a recorded run (default: the last), measured on a
    machine with `cores` cores (default: this one's)."""
    cores = cores or os.cpu_count() or 1
    attempts = [a for a in read_timeline(run_dir, session) if a.error_kind is None]
    if not attempts:
        raise ValueError(f"{run_dir}: no successful attempt in its timeline")
    meta = json.loads((run_dir / META_FILE).read_text(encoding="utf-8"))
    sessions = meta["sessions"]
    info = sessions[attempts[0].session]
    busy = sum(a.wall_s for a in attempts)
    u = float(info.get("cpu_s") or busy) / busy if busy else 1.0
    slots = len({a.slot for a in attempts})
    slowed = contention(slots, u, cores)
    firsts = _firsts(attempts)
    first_ids = {a.pair_id for a in firsts.values()}
    zygotes = 2 if info.get("zygotes") == "shared" and slots > 1 else 0
    starts: dict[str, list[float]] = {}
    cold: list[float] = []
    for a in attempts:
        # A prestarted stack's cost is its start's own duration (the pair waited less).
        took = a.prestart_s if a.prestarted else a.stack_s
        if took > STARTED_S:
            if a.pair_id in first_ids:
                cold.append(took / slowed)
            else:
                starts.setdefault(a.task["domain"], []).append(took / slowed)
    work = {a.pair_id: max(0.0, a.wall_s - a.stack_s) / slowed for a in attempts}
    by_domain: dict[str, list[float]] = {}
    for a in attempts:
        by_domain.setdefault(a.task["domain"], []).append(work[a.pair_id])
    typical = {d: statistics.median(v) for d, v in by_domain.items()}
    handoffs = sorted(a.done_s - a.submitted_s - a.wall_s for a in attempts)
    handoff = max(0.0, handoffs[len(handoffs) // 2])
    # A worker's first pair also loads its code and catalogue: that is the worker's
    # start-up (with its process start, before the pair reached it), not the pair's work.
    spawns, warmups = [], []
    for a in firsts.values():
        usual = typical[a.task["domain"]]
        spawned = a.done_s - a.submitted_s - a.wall_s - handoff
        spawned = spawned / starting(slots, zygotes, cores) if slots > 1 else 0.0
        spawns.append(max(0.0, spawned))
        warmups.append(max(0.0, work[a.pair_id] - usual))
        work[a.pair_id] = usual
    return RunModel(
        tasks=[a.trial_task() for a in attempts],
        work_s=work,
        stack_s={d: statistics.median(v) for d, v in starts.items()},
        first_stack_s=statistics.median(cold) if cold else None,
        driver_first_stack_s=statistics.median(cold) if cold and slots == 1 else None,
        spawn_s=statistics.median(spawns),
        warmup_s=statistics.median(warmups),
        handoff_s=handoff,
        u=u,
        zygotes=zygotes,
    )


def calibrated(run_dir: Path, single_dir: Path, cores: int | None = None) -> RunModel:
    """The model of `run_dir` (several workers) calibrated on `single_dir`, a one-worker
    run of the same pairs on the same machine: the pairs' uncontended work and stack
    starts come from the one-worker run, `u` is its cores per busy second, and the
    effective cores are what explains the slowdown the several workers saw (their pairs'
    work there against the same pairs' work alone, summed)."""
    cores = cores or os.cpu_count() or 1
    model, alone = model_from_run(run_dir, cores=cores), model_from_run(single_dir, cores=cores)
    attempts = read_timeline(run_dir, -1)
    raw = {a.pair_id: a.wall_s - a.stack_s for a in attempts if not a.error_kind}
    first = {a.pair_id for a in _firsts(attempts).values()}
    common = [p for p in raw if p not in first and p in alone.work_s]
    if not common:
        raise ValueError(f"{single_dir}: no pair in common with {run_dir}")
    # Their work together against alone: the sweep's time is a sum, so is the ratio.
    slowed = sum(raw[p] for p in common) / sum(alone.work_s[p] for p in common)
    workers = len({a.slot for a in attempts})
    effective = workers * alone.u / slowed if slowed > 1.0 else float(cores)
    model_slowed = contention(workers, model.u, cores)  # what model_from_run divided by
    return RunModel(
        tasks=model.tasks,
        work_s={p: alone.work_s.get(p, w) for p, w in model.work_s.items()},
        stack_s=alone.stack_s or model.stack_s,
        # A worker process's first start is the several-worker run's own (it may fork
        # from the driver's zygotes), as slowed there; one in the driver, the other run's.
        first_stack_s=(
            model.first_stack_s * model_slowed / max(1.0, slowed)
            if model.first_stack_s
            else alone.first_stack_s
        ),
        driver_first_stack_s=alone.driver_first_stack_s,
        spawn_s=model.spawn_s,
        zygotes=model.zygotes,
        warmup_s=model.warmup_s,
        handoff_s=model.handoff_s,
        u=alone.u,
        effective_cores=min(float(cores), effective),
    )


def _firsts(attempts: list[Attempt]) -> dict[int, Attempt]:
    """Each slot's first attempt."""
    firsts: dict[int, Attempt] = {}
    for a in sorted(attempts, key=lambda a: a.submitted_s):
        firsts.setdefault(a.slot, a)
    return firsts


def simulate(
    model: RunModel,
    workers: int,
    cores: float | None = None,
    *,
    max_stacks: int = DEFAULT_MAX_STACKS,
    spawn_s: float | None = None,
) -> dict[str, Any]:
    """The predicted wall time (to the last pair's end) and phases of the model's pairs on
    `workers` workers and `cores` cores (default: the model's effective cores, else this
    machine's). `spawn_s`: a worker process's start instead of the
    run's (one measured with a single worker, in the driver, has no process start)."""
    cores = cores or model.effective_cores or float(os.cpu_count() or 1)
    peak = 1.0
    # One worker runs in the driver: no process to start, only the first pair's loading.
    spawn = (model.spawn_s if spawn_s is None else spawn_s) if workers > 1 else 0.0
    spawn *= model.starting(workers, cores) if workers > 1 else 1.0
    queue = Scheduler(model.tasks)
    free = [0.0] * workers  # when each slot is next free
    held: list[OrderedDict[StackKey, None]] = [OrderedDict() for _ in range(workers)]
    on: list[StackKey | None] = [None] * workers
    started = [False] * workers
    first_at_work = [0.0] * workers
    stacks = [0] * workers
    idle_rounds = 0
    while len(queue):
        slot = min(range(workers), key=lambda s: (free[s], s))
        now = free[slot]
        others: Counter[StackKey] = Counter(
            k for s, k in enumerate(on) if s != slot and k is not None
        )
        task = queue.pop_for(list(held[slot]), others, slot)
        if task is None:  # ask again once a busy slot is done; idle ones go first
            idle_rounds += 1
            if idle_rounds > 2 * workers:  # every idle slot declined: take one anyway
                task = queue.pop_for(list(held[slot]), Counter(), slot)
            if task is None:  # (the rest may be kept for another slot: its turn comes)
                assert idle_rounds < 10 * workers, "the scheduler holds pairs nobody can take"
                busy = [free[s] for s in range(workers) if free[s] > now]
                free[slot] = min(busy) if busy else now + 1e-6
                continue
        idle_rounds = 0
        # The cores are shared by the workers busy when the pair starts.
        slow = contention(
            1 + sum(free[s] > now for s in range(workers) if s != slot), model.u, cores
        )
        peak = max(peak, slow)
        t = now + model.handoff_s
        first = not started[slot]
        if first:
            t += spawn + model.warmup_s * slow
            started[slot] = True
        key = task.stack_key
        stack = 0.0
        if key in held[slot]:
            held[slot].move_to_end(key)
        else:
            while len(held[slot]) >= max_stacks:
                held[slot].popitem(last=False)
            held[slot][key] = None
            cost = None
            if first:
                driver = workers == 1 and model.driver_first_stack_s
                cost = model.driver_first_stack_s if driver else model.first_stack_s
            stack = (cost or model.stack_cost(key)) * slow
            if first and workers > 1:
                # A worker process starts its first pair's stack while it loads for the
                # pair (`executors/prestart.py`): only what outlasts the loading is waited.
                stack = max(0.0, stack - model.warmup_s * slow)
            stacks[slot] += 1
        t += stack
        if first_at_work[slot] == 0.0:
            first_at_work[slot] = t
        work = model.work_s[task.pair_id] * slow
        free[slot] = t + work
        on[slot] = key
        # The real driver learns a pair's time when it ends; close enough here.
        queue.observe(task.pair_id, stack + work, stack, first=first)
    used = [s for s in range(workers) if started[s]]
    end = max(free[s] for s in used)
    startup = max(first_at_work[s] for s in used)
    tail_from = min(free[s] for s in used)
    return {
        "workers": workers,
        "cores": cores,
        "contention": round(peak, 3),
        "wall_s": round(end, 2),
        "startup_s": round(startup, 2),
        "tail_s": round(end - max(tail_from, startup), 2),
        "stacks_started": sum(stacks),
        "pairs": len(model.tasks),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a run directory with timeline.jsonl")
    p.add_argument("--workers", default="1,2,4,8,16", help="comma-separated worker counts")
    p.add_argument("--cores", type=int, default=None, help="the target machine's cores")
    p.add_argument("--measured-cores", type=int, default=None, help="the run's machine's")
    p.add_argument("--spawn-s", type=float, default=None, help="a worker's start-up, seconds")
    args = p.parse_args(argv)
    model = model_from_run(args.run, cores=args.measured_cores)
    cores = args.cores or os.cpu_count() or 1
    print(f"u = {model.u:.2f} cores per busy worker; {len(model.tasks)} pairs")
    print("workers  cores  contention  wall_s  startup_s  tail_s  stacks")
    for w in (int(x) for x in args.workers.split(",")):
        r = simulate(model, w, cores, spawn_s=args.spawn_s)
        print(
            f"{w:7d}  {cores:5d}  {r['contention']:10.2f}  {r['wall_s']:6.1f}  "
            f"{r['startup_s']:9.1f}  {r['tail_s']:6.1f}  {r['stacks_started']:6d}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
