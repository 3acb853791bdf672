"""A worker process's entry point: it starts the first pair's stack on a thread, then runs
the worker (`lanes.worker_main`), so that the stack's start (about 1.2 s: the service's and
the proxy's imports, in their own processes) overlaps the worker's loading of its agent,
the workflow's catalogue and the first pair's setup (about 0.7 s) instead of following
them. Also what every worker process does first: tie its life to the driver's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from multiprocessing.connection import Connection
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from undobench_gym.core.runtime import Runtime

_PR_SET_PDEATHSIG = 1
#: How long closing waits for a stack's start still under way (one takes 1-3 s).
CLOSE_JOIN_S = 10.0


class Prestart:
    """A stack started on a thread while the worker does something else (a new worker
    process: loading its first pair). The stack's own start code runs unchanged; the
    thread mostly waits on the stack's processes, so it costs the worker little."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.error: BaseException | None = None
        self.took_s = 0.0  # the start's own duration, however much of it was waited for
        self.thread = threading.Thread(
            target=self._start, daemon=True, name=f"undobench-prestart-{runtime.domain}"
        )
        self.thread.start()

    def _start(self) -> None:
        t0 = time.monotonic()
        try:
            self.runtime.start()
        except BaseException as exc:  # the pool starts a stack itself and records its error
            self.error = exc
        self.took_s = round(time.monotonic() - t0, 3)

    def take(self) -> Runtime | None:
        """The started runtime, or None if its start failed (closed here)."""
        self.thread.join()
        if self.error is None:
            return self.runtime
        with contextlib.suppress(Exception):
            self.runtime.close()
        return None

    def close(self) -> None:
        """Stop the stack, unless its start does not end within `CLOSE_JOIN_S`: then leave
        it to the process's exit (its children die with the spawner thread, and the next
        runtime removes the workdir). Seen: SIGTERM landed while the main thread held the
        import lock, the exception left it held, and the start, importing a module,
        waited for it forever, and so did an unbounded join here: an orphaned worker."""
        self.thread.join(CLOSE_JOIN_S)
        if self.thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self.runtime.close()


def die_with_parent(parent_pid: int) -> None:
    """In a worker process: get SIGTERM when the driver dies (even by SIGKILL), and turn
    SIGTERM into SystemExit so `finally` blocks close the stacks; ignore Ctrl-C, which the
    driver handles for the whole sweep."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def stop(_sig: int, _frame: FrameType | None) -> None:
        # Only the first one counts: the kernel sends the death signal again as each thread
        # of a SIGKILLed driver exits (seen ~40 ms apart), and a second SystemExit would cut
        # the stacks' close() short, leaving workdirs and unkilled children behind.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, stop)
    if os.getppid() != parent_pid:  # the driver died before the death signal was armed
        raise SystemExit(143)


def worker_entry(
    conn: Connection,
    parent_pid: int,
    name: str,
    max_stacks: int,
    trial_timeout: float | None,
    lanes: int = 1,
    first: tuple[int, str, str] | None = None,
    zygotes: dict[str, str] | None = None,
) -> None:
    """`first`: (lane, runtime, domain) of the pair the driver is about to send, whose
    stack starts here, before the worker loads anything for the pair. `zygotes`: the
    driver's, to fork this worker's stacks from (`runtime.warm.SharedZygotes`)."""
    die_with_parent(parent_pid)
    from undobench_gym.core.runtime.warm import WARM

    WARM.enable()
    WARM.connect(zygotes)  # else its own, started after its first stack
    early = None
    if first is not None:
        lane, runtime_kind, domain = first
        from undobench_gym.core.runtime import make_runtime

        early = (lane, runtime_kind, Prestart(make_runtime(runtime_kind, domain)))
    try:
        from undobench_gym.harness.executors.lanes import worker_main
    except BaseException:  # stopped (SIGTERM) or broken while loading: close the stack
        if early is not None:
            early[2].close()
        raise
    worker_main(conn, name, max_stacks, trial_timeout, lanes, early=early)
