"""A uvicorn server that stays asleep while idle.

uvicorn's housekeeping loop wakes ten times a second (to refresh the Date header once a
second and to notice `should_exit`). An idle stack's service (two servers) and proxy
(one) spent about 1.4 ms of CPU a second each on it, measured: for every stack a sweep
or a vector env holds, most of them idle at any moment. This loop wakes once a second
and at once when `should_exit` is set (from a signal handler, or another thread), so
an exit is not slower than uvicorn's. Written by hand: uvicorn has no setting for it.
"""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn

#: Seconds between housekeeping ticks: the Date header's own resolution.
TICK_S = 1.0
#: uvicorn counts ticks of 0.1 s and refreshes the Date header every tenth.
_TICKS_PER_WAKE = 10


class QuietServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit = False
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._exit = value
        loop, wake = self._loop, self._wake
        if value and loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(wake.set)

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TICK_S)
            counter = (counter + _TICKS_PER_WAKE) % 864000
            should_exit = await self.on_tick(counter)
