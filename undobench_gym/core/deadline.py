"""Time limits that stop Python code where it is: the agent's share of an episode (an agent
that overruns it has failed: the episode ends truncated) and the trial's own alarm.

Written by hand: no library interrupts arbitrary code in the calling thread. On the main
thread the limit is SIGALRM, which also breaks a blocking system call (a stuck model
request); a timer already running (the trial's alarm) is put back afterwards with the time
it had left, and it still fires first when it is the sooner one. Off the main thread (a
worker's lanes) a timer thread raises the exception in the limited thread
(`PyThreadState_SetAsyncExc`): it lands at that thread's next Python instruction, so a call
blocked in C ends the episode only when it returns (its own timeout bounds it).
"""

from __future__ import annotations

import contextlib
import ctypes
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
    message = f"the agent took over {seconds:.1f}s"
    with time_limit(seconds, AgentOverTime, message):
        t0 = time.monotonic()
        yield
    if time.monotonic() - t0 > seconds:  # a late async exception landed nowhere
        raise AgentOverTime(message)


@contextlib.contextmanager
def time_limit(seconds: float, exc: type[BaseException], message: str) -> Iterator[None]:
    """Raise `exc(message)` in this thread if the block runs past `seconds`."""
    if threading.current_thread() is threading.main_thread():
        with _alarm(seconds, exc, message):
            yield
    else:
        with _thread_timer(seconds, exc, message):
            yield


@contextlib.contextmanager
def _alarm(seconds: float, exc: type[BaseException], message: str) -> Iterator[None]:
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    outer_handler: Any = signal.getsignal(signal.SIGALRM)
    outer_first = 0 < outer_left <= seconds

    def fire(sig: int, frame: FrameType | None) -> None:
        if outer_first and callable(outer_handler):
            outer_handler(sig, frame)
        raise exc(message)

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


#: Which asynchronous exception is pending in which thread (one at most: a later one
#: replaces it), so that a block that ends clears its own and never an outer limit's.
_pending: dict[int, type[BaseException]] = {}
_pending_lock = threading.RLock()  # re-entered when the exception lands inside it


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
    if exc is None:
        _pending.pop(thread_id, None)
    else:
        _pending[thread_id] = exc


def _carrying(exc: type[BaseException], message: str) -> type[BaseException]:
    """A subclass of `exc` whose bare instances say `message`: an asynchronous exception is
    raised as `cls()`, so its message travels with the class; being made is being
    delivered, so it is no longer pending."""

    def init(self: BaseException, *args: Any) -> None:
        with _pending_lock:
            if _pending.get(threading.get_ident()) is type(self):
                del _pending[threading.get_ident()]
        exc.__init__(self, *(args or (message,)))

    return type(exc.__name__, (exc,), {"__init__": init, "__module__": exc.__module__})


@contextlib.contextmanager
def _thread_timer(seconds: float, exc: type[BaseException], message: str) -> Iterator[None]:
    target = threading.get_ident()
    carried = _carrying(exc, message)
    live = [True]

    def fire() -> None:
        with _pending_lock:
            if live[0]:
                _set_async_exc(target, carried)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with _pending_lock:
            live[0] = False
            if _pending.get(target) is carried:  # fired, but the block ended before it landed
                _set_async_exc(target, None)
        timer.cancel()


def raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    """Raise `exc` in another thread at its next Python instruction (a lane being stopped)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
