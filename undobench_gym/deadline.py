"""A time limit on agent code: an agent that overruns its episode's budget is stopped where
it is (a stuck model call included) and the episode ends truncated, an agent failure.

SIGALRM is the only way to interrupt arbitrary Python code in the same thread, so this is
written by hand; a timer already running (the trial's own alarm) is put back afterwards
with the time it had left, and it still fires first when it is the sooner one. Off the
main thread signals cannot be used: the limit is then checked after the call returns.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any


class AgentOverTime(BaseException):
    """The agent used up its episode's time. A BaseException, so agent code's own
    `except Exception` cannot swallow it."""


@contextlib.contextmanager
def agent_time_limit(seconds: float | None) -> Iterator[None]:
    if seconds is None:
        yield
        return
    if seconds <= 0:
        raise AgentOverTime("the episode's time limit had passed")
    if threading.current_thread() is not threading.main_thread():
        t0 = time.monotonic()
        yield
        if time.monotonic() - t0 > seconds:
            raise AgentOverTime(f"the agent took over {seconds:.1f}s")
        return
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    outer_handler: Any = signal.getsignal(signal.SIGALRM)
    outer_first = 0 < outer_left <= seconds

    def fire(sig: int, frame: FrameType | None) -> None:
        if outer_first and callable(outer_handler):
            outer_handler(sig, frame)
        raise AgentOverTime(f"the agent took over {seconds:.1f}s")

    t0 = time.monotonic()
    signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, outer_left if outer_first else seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, outer_handler)
        if outer_left > 0 and not outer_first:
            left = outer_left - (time.monotonic() - t0)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
