"""Where a sweep's wall time went: every attempt's slot, start and end, and the phases.

The driver notes when it hands a pair to a slot and when the outcome comes back; the
worker says how much of its time went to starting the pair's stack (`Outcome.stack_s`).
From those, per session:

- **start-up**: from the driver's start until every slot that ran a pair was at work on
  its first one (its process spawned, its first stack answering);
- **steady state**: from then until the first slot ran out of work for good;
- **tail**: from that first idle slot to the last outcome.

`timeline.jsonl` (one line per attempt, in the run directory) is what the schedule
simulator (`harness.simulate`) replays; `run_meta.json` keeps the phases.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from undobench_gym.harness.executors.base import Outcome, TrialTask

TIMELINE_FILE = "timeline.jsonl"


def cpu_seconds() -> float:
    """CPU time of this process and of its reaped descendants (worker processes, and the
    services and proxies they reaped), user and system."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass(frozen=True)
class Attempt:
    """One attempt of one pair on one slot; times in seconds from the session's start."""

    session: int
    slot: int
    worker: str
    task: dict[str, Any]  # the TrialTask's fields: the simulator schedules it again
    submitted_s: float
    done_s: float
    wall_s: float  # as the worker measured it (the driver's hand-off excluded)
    stack_s: float  # of wall_s: starting the stack
    error_kind: str | None
    prestarted: bool = False  # stack_s is only what outlasted a start begun earlier
    prestart_s: float = 0.0  # that start's own duration
    setup_s: float = 0.0  # of wall_s: the pair's loading, before its stack wait

    @property
    def pair_id(self) -> str:
        return str(self.task["pair_id"])

    @property
    def ready_s(self) -> float:
        """When the slot was at work on this pair: loaded, and its stack answering (a
        worker's first pair loads its agent and catalogue before it waits for the stack
        started while it loaded; timelines from before `setup_s` leave the loading out)."""
        return self.done_s - self.wall_s + self.setup_s + self.stack_s

    def trial_task(self) -> TrialTask:
        return TrialTask(**self.task)


class Timeline:
    def __init__(self, session: int, slots: int = 0) -> None:
        self.session, self.slots = session, slots
        self.t0 = time.monotonic()
        self.attempts: list[Attempt] = []
        self._open: dict[str, tuple[int, float, TrialTask]] = {}

    def submitted(self, slot: int, task: TrialTask) -> None:
        self._open[task.pair_id] = (slot, time.monotonic() - self.t0, task)

    def done(self, out: Outcome) -> None:
        slot, at, task = self._open.pop(out.pair_id)
        self.attempts.append(
            Attempt(
                self.session,
                slot,
                out.worker,
                asdict(task),
                round(at, 3),
                round(time.monotonic() - self.t0, 3),
                out.wall_s,
                out.stack_s,
                out.error_kind,
                out.prestarted,
                out.prestart_s,
                out.setup_s,
            )
        )

    def write(self, run_dir: Path) -> None:
        with (run_dir / TIMELINE_FILE).open("a", encoding="utf-8") as f:
            for a in self.attempts:
                f.write(json.dumps(asdict(a), separators=(",", ":")) + "\n")

    def phases(self, end_s: float | None = None) -> dict[str, Any]:
        return phases(self.attempts, self.slots, end_s)


def read_timeline(run_dir: Path, session: int | None = None) -> list[Attempt]:
    """The attempts of every session, or of one (-1: the last)."""
    rows = []
    with (run_dir / TIMELINE_FILE).open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            rows.append(Attempt(**d))
    if session == -1 and rows:
        session = rows[-1].session
    return [a for a in rows if session is None or a.session == session]


def phases(attempts: list[Attempt], slots: int, end_s: float | None = None) -> dict[str, Any]:
    """Start-up, steady state and tail (see the module's docstring), and per slot what it
    did: pairs, busy time, time spent starting stacks, and when it began and ended."""
    if not attempts:
        return {}
    by_slot: dict[int, list[Attempt]] = {}
    for a in attempts:
        by_slot.setdefault(a.slot, []).append(a)
    firsts = [min(runs, key=lambda a: a.submitted_s) for runs in by_slot.values()]
    lasts = [max(a.done_s for a in runs) for runs in by_slot.values()]
    startup = max(a.ready_s for a in firsts)
    tail_from = min(lasts)
    end = max(lasts) if end_s is None else max(end_s, max(lasts))
    workers = []
    for slot, runs in sorted(by_slot.items()):
        busy = sum(a.wall_s for a in runs)
        first = min(runs, key=lambda a: a.submitted_s)
        workers.append(
            {
                "slot": slot,
                "pairs": len(runs),
                "busy_s": round(busy, 2),
                "stack_start_s": round(sum(a.stack_s for a in runs), 2),
                "stacks_started": sum(1 for a in runs if a.stack_s > 0.05 or a.prestarted),
                "first_at_work_s": round(first.ready_s, 2),
                "last_done_s": round(max(a.done_s for a in runs), 2),
            }
        )
    return {
        "slots": slots,
        "slots_used": len(by_slot),
        "startup_s": round(startup, 2),
        "steady_s": round(max(0.0, tail_from - startup), 2),
        "tail_s": round(max(0.0, end - max(tail_from, startup)), 2),
        "wall_s": round(end, 2),
        "workers": workers,
    }
