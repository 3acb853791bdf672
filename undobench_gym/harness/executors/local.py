"""Local executors: in the driver process (one worker), or N spawned worker processes.

Each worker process owns its stacks for its lifetime and runs one pair at a time per lane
(`lanes.py`); the driver hands out pairs over a pipe per worker and reads results back, so
it always knows which pair each lane is on. A worker that dies, or overruns the trial
timeout by more than the grace period (its own time limit did not get it out), is killed
and replaced; its stacks die with it (PR_SET_PDEATHSIG), and the pair comes back as an
infrastructure error for the driver's retry policy. The pairs of its other lanes, killed
for no fault of theirs, come back `INTERRUPTED`: run again without using an attempt.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.runtime.process import remove_stale_workdirs
from undobench_gym.core.runtime.warm import WARM, SharedZygotes
from undobench_gym.harness.executors.base import (
    INTERRUPTED,
    TIMEOUT,
    WORKER_DIED,
    Outcome,
    StackKey,
    TrialTask,
)
from undobench_gym.harness.executors.prestart import worker_entry
from undobench_gym.harness.executors.worker import TrialWorker

#: How long past the trial timeout the driver waits before it kills a worker.
HARD_TIMEOUT_GRACE_S = 30.0
#: Fresh workers that may die before their first result (beyond one per slot) before the
#: sweep stops: a worker that cannot even start would fail every pair the same way.
MAX_START_DEATHS = 3
#: How long workers get to close their stacks when the sweep ends or is interrupted.
CLOSE_GRACE_S = 15.0


class InlineExecutor:
    """One worker in the driver process: no extra processes, the soft timeout only."""

    name = "inline"
    slots = 1

    def __init__(self, *, max_stacks: int, trial_timeout: float | None) -> None:
        self.worker = TrialWorker("inline", max_stacks=max_stacks, trial_timeout=trial_timeout)
        self._task: tuple[TrialTask, int] | None = None
        WARM.enable()  # a stack for the next domain is forked from zygotes

    def idle(self) -> list[int]:
        return [] if self._task else [0]

    def held(self, slot: int) -> list[StackKey]:
        return self.worker.held()

    def submit(self, slot: int, task: TrialTask, attempt: int) -> None:
        self._task = (task, attempt)

    def wait(self, timeout: float) -> list[Outcome]:
        if self._task is None:
            return []
        task, attempt = self._task
        self._task = None
        return [self.worker.run(task, attempt)]

    def close(self) -> None:
        self.worker.close()
        WARM.close()


@dataclass
class _Worker:
    index: int
    proc: BaseProcess | None = None
    conn: Connection | None = None
    generation: int = 0
    answered: bool = False  # this worker process has sent back at least one outcome


@dataclass
class _Slot:
    index: int
    worker: _Worker
    lane: int
    task: TrialTask | None = None
    attempt: int = 0
    started: float = 0.0
    held: tuple[StackKey, ...] = ()


class ProcessExecutor:
    """N worker processes (`spawn` start method: nothing of the driver's state is forked),
    `lanes` pairs in flight in each: `workers * lanes` slots."""

    name = "local"

    def __init__(
        self,
        workers: int,
        *,
        max_stacks: int,
        trial_timeout: float | None,
        grace: float = HARD_TIMEOUT_GRACE_S,
        lanes: int = 1,
    ) -> None:
        if workers < 1 or lanes < 1:
            raise ValueError("workers and lanes must be at least 1")
        self.ctx = mp.get_context("spawn")
        self.lanes = lanes
        self.slots = workers * lanes
        self.max_stacks = max_stacks
        self.trial_timeout = trial_timeout
        self.grace = grace
        self._workers = [_Worker(i) for i in range(workers)]
        self._slots = [_Slot(i, self._workers[i // lanes], i % lanes) for i in range(self.slots)]
        self._lost: list[Outcome] = []  # outcomes of lanes lost while submitting
        self.replaced = 0
        self.start_deaths = 0
        # Started before the workers, so their imports overlap the workers' own.
        self.zygotes = SharedZygotes.start()

    # ---- workers --------------------------------------------------------------------

    def _start(self, w: _Worker, first: tuple[int, TrialTask] | None = None) -> None:
        """Start `w`'s process; with `first`, the (lane, pair) it gets first, so that the
        pair's stack starts while the process loads."""
        parent, child = self.ctx.Pipe()
        w.generation += 1
        name = f"worker-{w.index}.{w.generation}"
        early = None
        if first is not None:
            lane, task = first
            early = (lane, task.runtime, task.domain)
        zygotes = self.zygotes.addresses if self.zygotes is not None else None
        args = (
            *(child, os.getpid(), name, self.max_stacks, self.trial_timeout, self.lanes),
            *(early, zygotes),
        )
        proc = self.ctx.Process(
            target=worker_entry, args=args, name=f"undobench-{name}", daemon=True
        )
        proc.start()
        child.close()
        w.proc, w.conn, w.answered = proc, parent, False
        for s in self._lanes(w):
            s.held = ()

    def _kill(self, w: _Worker) -> None:
        """SIGTERM first (the worker closes its stacks), SIGKILL if it does not go."""
        proc, conn = w.proc, w.conn
        w.proc = w.conn = None
        for s in self._lanes(w):
            s.held = ()
        if conn is not None:
            conn.close()
        if proc is None:
            return
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        with contextlib.suppress(ValueError):
            proc.close()

    def _lanes(self, w: _Worker) -> list[_Slot]:
        return self._slots[w.index * self.lanes : (w.index + 1) * self.lanes]

    def _label(self, s: _Slot) -> str:
        name = f"worker-{s.worker.index}.{s.worker.generation}"
        return f"{name}/{s.lane}" if self.lanes > 1 else name

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.proc is not None and w.proc.pid]

    # ---- the Executor protocol ---------------------------------------------------------

    def idle(self) -> list[int]:
        return [s.index for s in self._slots if s.task is None]

    def held(self, slot: int) -> list[StackKey]:
        return list(self._slots[slot].held)

    def submit(self, slot: int, task: TrialTask, attempt: int) -> None:
        s = self._slots[slot]
        w = s.worker
        if w.proc is None or not w.proc.is_alive():
            if w.proc is not None:  # died since the last wait(): its busy lanes are lost
                code = w.proc.exitcode
                self._lost += self._lose(w, WORKER_DIED, f"worker process died (exit code {code})")
            self._kill(w)
            self._start(w, first=(s.lane, task))
        assert w.conn is not None
        s.task, s.attempt, s.started = task, attempt, time.monotonic()
        # If it died just now, wait() reports it through the sentinel.
        with contextlib.suppress(OSError):
            w.conn.send((s.lane, task.__dict__, attempt))

    def _lose(
        self, w: _Worker, kind: str, message: str, culprit: _Slot | None = None
    ) -> list[Outcome]:
        """End every busy lane of `w` and kill it: `kind` for the culprit (or for all, when
        the process died of itself), `INTERRUPTED` for the lanes killed beside it."""
        if kind == WORKER_DIED and not w.answered:
            self.start_deaths += 1
            if self.start_deaths > MAX_START_DEATHS + len(self._workers):
                raise UndoBenchError(
                    f"{self.start_deaths} worker processes in a row died before finishing "
                    f"a single pair (last: {message}); their tracebacks are on stderr above"
                )
        outs: list[Outcome] = []
        for s in self._lanes(w):
            if s.task is None:
                continue
            if culprit is None or s is culprit:
                out = Outcome(s.task.pair_id, s.attempt, error_kind=kind, error=message)
            else:
                why = f"its worker was killed when lane {culprit.lane}'s pair timed out"
                out = Outcome(s.task.pair_id, s.attempt, error_kind=INTERRUPTED, error=why)
            out.worker = self._label(s)
            out.wall_s = round(time.monotonic() - s.started, 3)
            s.task = None
            outs.append(out)
        self._kill(w)
        self.replaced += 1
        return outs

    def _receive(self, w: _Worker) -> list[Outcome]:
        assert w.conn is not None
        outs: list[Outcome] = []
        with contextlib.suppress(EOFError, OSError):
            while w.conn.poll():
                lane, data = w.conn.recv()
                out = Outcome.from_dict(data)
                s = self._lanes(w)[lane]
                s.held, s.task, w.answered = tuple(out.held), None, True
                self.start_deaths = 0
                outs.append(out)
        return outs

    def wait(self, timeout: float) -> list[Outcome]:
        outcomes, self._lost = self._lost, []
        busy = [s for s in self._slots if s.task is not None]
        if not busy:
            return outcomes
        now = time.monotonic()
        if outcomes:
            timeout = 0.0
        elif self.trial_timeout:
            deadline = min(s.started + self.trial_timeout + self.grace for s in busy)
            timeout = max(0.0, min(timeout, deadline - now))
        workers = list({id(s.worker): s.worker for s in busy}.values())
        objects: list[Any] = []
        for w in workers:
            assert w.conn is not None and w.proc is not None
            objects += [w.conn, w.proc.sentinel]
        ready = set(wait(objects, timeout))
        for w in workers:
            assert w.conn is not None and w.proc is not None
            if w.conn in ready or w.proc.sentinel in ready:
                outcomes += self._receive(w)
                if w.proc.sentinel in ready and any(s.task for s in self._lanes(w)):
                    w.proc.join(2)  # its pipe can close a moment before it exits
                    code = w.proc.exitcode
                    outcomes += self._lose(
                        w, WORKER_DIED, f"worker process died (exit code {code})"
                    )
                    continue
            late = [
                s
                for s in self._lanes(w)
                if s.task is not None
                and self.trial_timeout
                and time.monotonic() > s.started + self.trial_timeout + self.grace
            ]
            if late:
                message = (
                    f"the trial ran past its {self.trial_timeout:g}s timeout and the "
                    f"worker did not answer {self.grace:g}s later: worker killed"
                )
                outcomes += self._lose(w, TIMEOUT, message, culprit=late[0])
        return outcomes

    def close(self) -> None:
        """Idle workers are asked to stop, busy ones (Ctrl-C mid-trial) get SIGTERM; all
        share one deadline to close their stacks before SIGKILL."""
        for w in self._workers:
            if w.proc is None:
                continue
            if w.conn is not None and not any(s.task for s in self._lanes(w)):
                with contextlib.suppress(OSError):
                    w.conn.send(None)
            elif w.proc.is_alive():
                w.proc.terminate()
        deadline = time.monotonic() + CLOSE_GRACE_S
        for w in self._workers:
            if w.proc is not None:
                w.proc.join(max(0.1, deadline - time.monotonic()))
            self._kill(w)
        for s in self._slots:
            s.task = None
        if self.zygotes is not None:
            self.zygotes.close()
            self.zygotes = None
        # A worker SIGKILLed past the deadline could not remove its stacks' workdirs.
        remove_stale_workdirs()
