"""Start mitmdump with the stack addons: `undobench-proxy [mitmdump options]`.

The addon script's path is resolved here, so the same command works from a source
checkout, a virtual environment, or the container image.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_OPTIONS = [
    "--set",
    "flow_detail=0",
    "--set",
    "termlog_verbosity=warn",
    "--set",
    "connection_strategy=lazy",
]


def addon_script() -> str:
    return str(Path(__file__).with_name("stack.py"))


def _accepts_eager_start(factory: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read: leave the factory alone
        return True
    return any(p.name == "eager_start" or p.kind is p.VAR_KEYWORD for p in params)


def _uvloop_loop_class(uvloop: Any) -> type[asyncio.AbstractEventLoop]:
    """uvloop's loop, made to take CPython's eager task factory on every Python.

    mitmproxy (12, on Python 3.12+) runs its master with `asyncio.eager_task_factory` as
    the loop's task factory. uvloop (0.22+) on Python 3.13 calls a task factory with an
    `eager_start` keyword, the 3.14 calling convention, but the factory CPython 3.13.0
    builds (`create_eager_task_factory.<locals>.factory`) takes only `name` and `context`:
    every task then fails with a TypeError and the proxy exits. A factory without that
    keyword gets it dropped here: it decides eagerness itself (the eager one always starts
    eagerly), as under CPython's own loop, which never passes it on 3.13."""

    class Loop(uvloop.Loop):  # type: ignore[misc]
        def set_task_factory(self, factory: Callable[..., Any] | None) -> None:
            if factory is not None and not _accepts_eager_start(factory):
                inner = factory

                def factory(loop: Any, coro: Any, *, eager_start: Any = None, **kw: Any) -> Any:
                    return inner(loop, coro, **kw)

            super().set_task_factory(factory)

    return Loop


def _runs_eager_tasks(loop_class: type[asyncio.AbstractEventLoop]) -> bool:
    """Whether `loop_class` runs a task under the task factory mitmproxy sets (Python 3.12+
    only; before 3.12 there is no eager factory and mitmproxy sets none)."""
    eager = getattr(asyncio, "eager_task_factory", None)

    async def probe() -> bool:
        return await asyncio.get_running_loop().create_task(asyncio.sleep(0, True))

    loop, coro = loop_class(), probe()
    try:
        if eager is not None:
            loop.set_task_factory(eager)
        return loop.run_until_complete(coro)
    except Exception:
        coro.close()  # never started: no "never awaited" warning
        return False
    finally:
        loop.close()


def use_uvloop() -> None:
    """Run mitmproxy's event loop on uvloop (a core dependency, not on Windows): its
    transports and loop are C, which takes a share off the proxy's CPU per flow.
    mitmproxy starts its loop with `asyncio.run`, so the policy is the hook (deprecated
    from Python 3.14, removed in 3.16: past that, asyncio's own loop).

    The loop is checked once before it is installed, with the task factory mitmproxy
    sets (`_uvloop_loop_class`): a uvloop release that still cannot run it leaves the
    proxy on asyncio's loop, which is slower but serves the same flows, instead of a
    proxy that exits at start."""
    try:
        import uvloop
    except ImportError:
        return  # asyncio's own loop, as on Windows
    policy_class = getattr(uvloop, "EventLoopPolicy", None)
    if policy_class is None:
        return  # Python 3.16+: no policies; asyncio's own loop
    loop_class = _uvloop_loop_class(uvloop)
    if not _runs_eager_tasks(loop_class):
        return

    class Policy(policy_class):  # type: ignore[misc,valid-type]
        def _loop_factory(self) -> asyncio.AbstractEventLoop:
            return loop_class()

    asyncio.set_event_loop_policy(Policy())


def main() -> None:
    from mitmproxy.tools.main import mitmdump

    use_uvloop()

    sys.argv = ["mitmdump", "-s", addon_script(), *DEFAULT_OPTIONS, *sys.argv[1:]]
    mitmdump()


if __name__ == "__main__":
    main()
