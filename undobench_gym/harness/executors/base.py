"""What travels between the sweep driver and its executors, and the one retry policy.

A `TrialTask` names a pair by ids only (no live objects), so the same task can go to an
in-process worker, a spawned worker process or a Ray actor. An `Outcome` comes back with
either the pair record or an infrastructure error of a known kind; the driver alone decides
what to retry and alone writes trials.jsonl.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from undobench_gym.agents.methods import server_idempotency_for

#: Infrastructure error kinds. Only these are ever retried; an agent that fails (or raises)
#: is an outcome, not an error.
STACK_START = "stack_start"
STACK_UNHEALTHY = "stack_unhealthy"
TIMEOUT = "timeout"
WORKER_DIED = "worker_died"
HARNESS = "harness"  # any other exception outside the agent: admin API, proxy control, …
PROVIDER = "provider"  # the model server kept failing after the agent's own retries
INFRA_KINDS = (STACK_START, STACK_UNHEALTHY, TIMEOUT, WORKER_DIED, HARNESS, PROVIDER)
#: Stopped with its worker when another lane's pair had to be killed: run again, and not
#: counted as an attempt (the pair did nothing wrong).
INTERRUPTED = "interrupted"
#: A usage error (unknown scenario, bad agent spec): it would fail every trial, so it stops
#: the sweep instead of being recorded.
USAGE = "usage"

StackKey = tuple[str, str]  # (domain, server-idempotency mode)

#: The env's client timeout in a sweep: UndoBenchEnv's own default (tests/test_sweep.py
#: checks they agree). A `timeout` fault costs this much per faulted call; a call that
#: times out with no fault planned voids the episode (an infrastructure error, retried).
DEFAULT_HTTP_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class TrialTask:
    pair_id: str
    workflow: str
    domain: str
    scenario: str
    method: str
    seed: int
    agent: str  # the --agent spec the worker builds the agent from
    framework: str | None
    runtime: str
    max_steps: int
    http_timeout: float = DEFAULT_HTTP_TIMEOUT_S  # the env's client timeout for every call
    # The agent's control does not depend on the scenario (`deterministic` or
    # `seeded_controls`) and the sweep shares controls: the pairs of one
    # `control_key` have the same control episode, so a worker runs it once (pairing.py).
    share_control: bool = False

    @property
    def stack_key(self) -> StackKey:
        return (self.domain, server_idempotency_for(self.method))

    @property
    def control_key(self) -> tuple[Any, ...] | None:
        """What a control episode depends on: everything but the scenario, which only the
        fault episode reads. None: this pair runs its own control."""
        if not self.share_control:
            return None
        return (
            self.workflow,
            self.method,
            self.seed,
            self.agent,
            self.framework,
            self.runtime,
            self.max_steps,
            self.http_timeout,
        )


@dataclass
class Outcome:
    pair_id: str
    attempt: int
    record: dict[str, Any] | None = None
    error_kind: str | None = None
    error: str | None = None
    worker: str = ""
    held: list[StackKey] = field(default_factory=list)  # the worker's stacks, LRU order
    wall_s: float = 0.0
    stack_s: float = 0.0  # of wall_s: starting the pair's stack (0 when the worker held it)
    prestarted: bool = False  # its stack was started before the pair came (prestart.py)
    prestart_s: float = 0.0  # that start's own duration (stack_s: what the pair waited of it)
    setup_s: float = 0.0  # of wall_s: loading the agent and workflow, before the stack wait

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(**{**d, "held": [tuple(k) for k in d.get("held", [])]})


@dataclass(frozen=True)
class RetryPolicy:
    """The same for every pair, whatever its outcome: a pair is re-run (control and fault
    episode both, on a fresh stack) only after an infrastructure error, at most
    `max_attempts` times in all. Agent failures are never retried, so retries cannot
    select for outcomes."""

    max_attempts: int = 2
    retry_on: tuple[str, ...] = INFRA_KINDS

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        unknown = set(self.retry_on) - set(INFRA_KINDS)
        if unknown:
            raise ValueError(f"only infrastructure errors can be retried, not {sorted(unknown)}")

    def should_retry(self, kind: str | None, attempt: int) -> bool:
        return kind in self.retry_on and attempt < self.max_attempts

    def describe(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "retried_error_kinds": list(self.retry_on),
            "never_retried": [
                "agent failures (an unfinished or wrong episode, an exception in agent code)",
                "usage errors (they stop the sweep)",
            ],
            "applies_to": "every pair, whatever its outcome; a retry re-runs both episodes",
        }


class Executor(Protocol):
    """Runs one task per slot at a time; `wait` returns finished outcomes, including the
    infrastructure errors it detected itself (a dead worker, a trial past its deadline)."""

    name: str
    slots: int

    def idle(self) -> list[int]: ...

    def held(self, slot: int) -> list[StackKey]: ...

    def submit(self, slot: int, task: TrialTask, attempt: int) -> None: ...

    def wait(self, timeout: float) -> list[Outcome]: ...

    def close(self) -> None: ...
