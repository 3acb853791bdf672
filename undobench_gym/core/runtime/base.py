"""The runtime interface: start a stack, tell its endpoints, keep it healthy, stop it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import TracebackType

from undobench_gym.contract import CRASH_EXIT_CODE
from undobench_gym.contract.errors import StackStartError
from undobench_gym.contract.stack_auth import auth_headers

__all__ = ["CRASH_EXIT_CODE", "Runtime", "StackEndpoints"]


@dataclass(frozen=True)
class StackEndpoints:
    agent_url: str  # the fault proxy: the only way in for the agent
    control_url: str  # the proxy's control API
    admin_urls: dict[str, str]  # service name -> admin API base URL (never proxied)
    #: The stack's secret: the admin and control APIs answer only requests with it.
    token: str = field(default="", repr=False)

    @property
    def auth(self) -> dict[str, str]:
        """The header every admin and control request carries (never an agent's call)."""
        return auth_headers(self.token)


class Runtime(ABC):
    """One stack: a fault proxy plus the services of one domain.

    A runtime keeps its endpoints once started (`_endpoints`) and counts restarts and
    unplanned exits (`_restarts`, `_unplanned`) as its supervisor sees them."""

    domain: str
    _endpoints: StackEndpoints | None = None
    _restarts: int = 0
    _unplanned: int = 0
    #: Whether an episode's verdict probes the stack over HTTP before it reads it. A
    #: runtime that learns of every exit from its processes themselves (not from a health
    #: answer) sets False: there the verdict's own reads are the probe.
    verdict_probe: bool = True

    @abstractmethod
    def start(self) -> StackEndpoints: ...

    @property
    def endpoints(self) -> StackEndpoints:
        if self._endpoints is None:
            raise StackStartError("stack not started: call start() first")
        return self._endpoints

    @abstractmethod
    def wait_healthy(self, timeout: float = 30.0, probe: bool = False) -> None:
        """Block until every process is up, restarting crashed ones; with `probe`, until
        every service and the proxy answer over HTTP (after a failure was seen: a process
        that is exiting has closed its sockets before it can be reaped)."""

    @property
    def restarts(self) -> int:
        """Processes (or containers) this runtime started again after they exited."""
        return self._restarts

    @property
    def unplanned_exits(self) -> int:
        """How many times, since start, a process of the stack exited without the fault
        plan asking for it: a service exiting with any code but a crash point's
        `CRASH_EXIT_CODE`, or the proxy exiting at all. The env compares it before and
        after each call: a change means the episode is void (StackUnhealthyError)."""
        return self._unplanned

    @abstractmethod
    def close(self) -> None:
        """Idempotent; leaves no process, container or port behind."""

    def __enter__(self) -> Runtime:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
