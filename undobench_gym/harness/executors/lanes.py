"""A local worker process and its lanes: each lane drives one pair at a time on its own
stacks, so a process can keep several pairs in flight.

Why lanes: a pair spends part of its time waiting (the ambiguous scenario's pad, a crash
restart, a stack start); with one pair per process a 2-core machine sat 15 % idle at two
workers. A lane is a thread with its own `TrialWorker` (its own stacks, agents and
control cache), so nothing is shared between lanes but the pipe, and its time limits are
`deadline.time_limit`'s thread timers instead of SIGALRM.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from undobench_gym.core.deadline import raise_in_thread
from undobench_gym.core.runtime.warm import WARM
from undobench_gym.harness.executors.base import TrialTask
from undobench_gym.harness.executors.prestart import Prestart
from undobench_gym.harness.executors.worker import TrialWorker

#: How long lanes get to close their stacks when the process is told to stop; the driver
#: waits `local.CLOSE_GRACE_S` (longer) before it SIGKILLs the process.
LANE_CLOSE_S = 12.0


def worker_main(
    conn: Connection,
    name: str,
    max_stacks: int,
    trial_timeout: float | None,
    lanes: int = 1,
    *,
    early: tuple[int, str, Prestart] | None = None,
) -> None:
    """Receive (lane, task, attempt), send back (lane, outcome), until told to stop (None)
    or the driver goes away. One lane runs on the main thread (SIGALRM time limits); more
    run on threads, the main thread only dispatching. `early`: (lane, runtime, stack) a
    stack being started for that lane's first pair (`prestart.worker_entry`)."""
    WARM.enable()
    if lanes == 1:
        worker = TrialWorker(name, max_stacks=max_stacks, trial_timeout=trial_timeout)
        if early is not None:
            worker.hold(early[1], early[2])
        try:
            while (msg := _receive(conn)) is not None:
                lane, task, attempt = msg
                conn.send((lane, worker.run(TrialTask(**task), attempt).to_dict()))
        finally:
            worker.close()
        return
    # Each lane keeps `max_stacks` of its own: with half each, lanes evicted stacks they
    # came back to (measured: 11 % more CPU for the factorial than with the full count).
    send = threading.Lock()
    threads = [
        Lane(
            i,
            TrialWorker(f"{name}/{i}", max_stacks=max_stacks, trial_timeout=trial_timeout),
            conn,
            send,
        )
        for i in range(lanes)
    ]
    if early is not None:
        threads[early[0]].worker.hold(early[1], early[2])
    for t in threads:
        t.start()
    try:
        while (msg := _receive(conn)) is not None:
            lane, task, attempt = msg
            threads[lane].inbox.put((task, attempt))
    finally:
        _stop(threads)


def _receive(conn: Connection) -> Any:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


class Lane(threading.Thread):
    def __init__(
        self, index: int, worker: TrialWorker, conn: Connection, send_lock: threading.Lock
    ) -> None:
        super().__init__(name=f"undobench-lane-{index}", daemon=True)
        self.index, self.worker = index, worker
        self.conn, self.send_lock = conn, send_lock  # the pipe is shared by the lanes
        self.inbox: queue.SimpleQueue[tuple[dict[str, Any], int] | None] = queue.SimpleQueue()
        self.busy = False

    def run(self) -> None:
        try:
            while (msg := self.inbox.get()) is not None:
                self.busy = True
                task, attempt = msg
                out = self.worker.run(TrialTask(**task), attempt).to_dict()
                self.busy = False
                with self.send_lock, contextlib.suppress(OSError):
                    self.conn.send((self.index, out))
        finally:
            # Also when `_stop` ended a pair with SystemExit: the lane's stacks close here.
            self.worker.close()


def _stop(threads: list[Lane]) -> None:
    """Idle lanes finish; a busy one (the process is being stopped mid-sweep) gets
    SystemExit at its next Python instruction. Each closes its own stacks."""
    for t in threads:
        t.inbox.put(None)
        if t.busy and t.ident is not None:
            raise_in_thread(t.ident, SystemExit)
    deadline = time.monotonic() + LANE_CLOSE_S
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
