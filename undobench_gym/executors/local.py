"""Local executors: in the driver process (one worker), or N spawned worker processes.

Each worker process owns its stacks for its lifetime and runs one pair at a time; the
driver hands out pairs over a pipe per worker and reads results back, so it always knows
which pair a worker is on. A worker that dies, or overruns the trial timeout by more than
the grace period (the worker's own SIGALRM did not get it out), is killed and replaced;
its stacks die with it (PR_SET_PDEATHSIG), and the pair comes back as an infrastructure
error for the driver's retry policy.
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

from ..errors import UndoBenchError
from ..runtime.process import remove_stale_workdirs
from .base import TIMEOUT, WORKER_DIED, Outcome, StackKey, TrialTask
from .worker import TrialWorker, die_with_parent

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


def worker_main(
    conn: Connection, parent_pid: int, name: str, max_stacks: int, trial_timeout: float | None
) -> None:
    """A worker process: receive (task, attempt), send back the outcome, until told to stop
    (None) or the driver goes away."""
    die_with_parent(parent_pid)
    worker = TrialWorker(name, max_stacks=max_stacks, trial_timeout=trial_timeout)
    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if msg is None:
                break
            task, attempt = msg
            conn.send(worker.run(TrialTask(**task), attempt).to_dict())
    finally:
        worker.close()


@dataclass
class _Slot:
    index: int
    proc: BaseProcess | None = None
    conn: Connection | None = None
    task: TrialTask | None = None
    attempt: int = 0
    started: float = 0.0
    generation: int = 0
    held: tuple[StackKey, ...] = ()
    answered: bool = False  # this worker process has sent back at least one outcome


class ProcessExecutor:
    """N worker processes (`spawn` start method: nothing of the driver's state is forked)."""

    name = "local"

    def __init__(
        self,
        workers: int,
        *,
        max_stacks: int,
        trial_timeout: float | None,
        grace: float = HARD_TIMEOUT_GRACE_S,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.ctx = mp.get_context("spawn")
        self.slots = workers
        self.max_stacks = max_stacks
        self.trial_timeout = trial_timeout
        self.grace = grace
        self._slots = [_Slot(i) for i in range(workers)]
        self.replaced = 0
        self.start_deaths = 0

    # ---- workers --------------------------------------------------------------------

    def _start(self, slot: _Slot) -> None:
        parent, child = self.ctx.Pipe()
        slot.generation += 1
        name = f"worker-{slot.index}.{slot.generation}"
        proc = self.ctx.Process(
            target=worker_main,
            args=(child, os.getpid(), name, self.max_stacks, self.trial_timeout),
            name=f"undobench-{name}",
            daemon=True,
        )
        proc.start()
        child.close()
        slot.proc, slot.conn, slot.held, slot.answered = proc, parent, (), False

    def _kill(self, slot: _Slot) -> None:
        """SIGTERM first (the worker closes its stacks), SIGKILL if it does not go."""
        proc, conn = slot.proc, slot.conn
        slot.proc = slot.conn = None
        slot.held = ()
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

    def pids(self) -> list[int]:
        return [s.proc.pid for s in self._slots if s.proc is not None and s.proc.pid]

    # ---- the Executor protocol ---------------------------------------------------------

    def idle(self) -> list[int]:
        return [s.index for s in self._slots if s.task is None]

    def held(self, slot: int) -> list[StackKey]:
        return list(self._slots[slot].held)

    def submit(self, slot: int, task: TrialTask, attempt: int) -> None:
        s = self._slots[slot]
        if s.proc is None or not s.proc.is_alive():
            self._kill(s)
            self._start(s)
        assert s.conn is not None
        s.task, s.attempt, s.started = task, attempt, time.monotonic()
        # If it died just now, wait() reports it through the sentinel.
        with contextlib.suppress(OSError):
            s.conn.send((task.__dict__, attempt))

    def _finish(self, s: _Slot, kind: str, message: str) -> Outcome:
        assert s.task is not None
        if kind == WORKER_DIED and not s.answered:
            self.start_deaths += 1
            if self.start_deaths > MAX_START_DEATHS + self.slots:
                raise UndoBenchError(
                    f"{self.start_deaths} worker processes in a row died before finishing "
                    f"a single pair (last: {message}); their tracebacks are on stderr above"
                )
        out = Outcome(s.task.pair_id, s.attempt, error_kind=kind, error=message)
        out.worker = f"worker-{s.index}.{s.generation}"
        out.wall_s = round(time.monotonic() - s.started, 3)
        self._kill(s)
        self.replaced += 1
        s.task = None
        return out

    def wait(self, timeout: float) -> list[Outcome]:
        busy = [s for s in self._slots if s.task is not None]
        if not busy:
            return []
        now = time.monotonic()
        if self.trial_timeout:
            deadline = min(s.started + self.trial_timeout + self.grace for s in busy)
            timeout = max(0.0, min(timeout, deadline - now))
        objects: list[Any] = []
        for s in busy:
            assert s.conn is not None and s.proc is not None
            objects += [s.conn, s.proc.sentinel]
        ready = set(wait(objects, timeout))
        outcomes: list[Outcome] = []
        for s in busy:
            assert s.conn is not None and s.proc is not None
            if s.conn in ready or s.proc.sentinel in ready:
                try:
                    if s.conn.poll():
                        out = Outcome.from_dict(s.conn.recv())
                        s.held, s.task, s.answered = tuple(out.held), None, True
                        self.start_deaths = 0
                        outcomes.append(out)
                        continue
                except (EOFError, OSError):
                    pass
                s.proc.join(2)  # its pipe can close a moment before it exits
                code = s.proc.exitcode
                outcomes.append(
                    self._finish(s, WORKER_DIED, f"worker process died (exit code {code})")
                )
            elif self.trial_timeout and time.monotonic() > (
                s.started + self.trial_timeout + self.grace
            ):
                outcomes.append(
                    self._finish(
                        s,
                        TIMEOUT,
                        f"the trial ran past its {self.trial_timeout:g}s timeout and the "
                        f"worker did not answer {self.grace:g}s later: worker killed",
                    )
                )
        return outcomes

    def close(self) -> None:
        """Idle workers are asked to stop, busy ones (Ctrl-C mid-trial) get SIGTERM; all
        share one deadline to close their stacks before SIGKILL."""
        for s in self._slots:
            if s.proc is None:
                continue
            if s.conn is not None and s.task is None:
                with contextlib.suppress(OSError):
                    s.conn.send(None)
            elif s.proc.is_alive():
                s.proc.terminate()
        deadline = time.monotonic() + CLOSE_GRACE_S
        for s in self._slots:
            if s.proc is not None:
                s.proc.join(max(0.1, deadline - time.monotonic()))
            self._kill(s)
            s.task = None
        # A worker SIGKILLed past the deadline could not remove its stacks' workdirs.
        remove_stale_workdirs()
