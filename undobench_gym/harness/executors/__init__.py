"""Where the pairs of a sweep run: in the driver, in local worker processes, or on Ray."""

from __future__ import annotations

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.harness.executors.base import (
    INFRA_KINDS,
    Executor,
    Outcome,
    RetryPolicy,
    StackKey,
    TrialTask,
)
from undobench_gym.harness.executors.local import InlineExecutor, ProcessExecutor
from undobench_gym.harness.executors.ray_actors import RayExecutor

__all__ = ["INFRA_KINDS", "Executor", "Outcome", "RetryPolicy", "StackKey", "TrialTask"]
__all__ += ["InlineExecutor", "ProcessExecutor", "RayExecutor", "make_executor"]
__all__ += ["DEFAULT_LANES", "DEFAULT_MAX_STACKS"]

EXECUTORS = ("local", "ray")
DEFAULT_MAX_STACKS = 4
#: Pairs in flight per local worker process when the sweep does not say. One: on the
#: 2-core machine, lanes made the scripted factorial slower (304 -> 319 s, 500 -> 598
#: CPU-s, alternated in one session); they pay where pairs wait (a model's latency).
DEFAULT_LANES = 1


def make_executor(
    kind: str,
    workers: int,
    *,
    trial_timeout: float | None,
    max_stacks: int = DEFAULT_MAX_STACKS,
    ray_address: str | None = None,
    grace: float | None = None,
    lanes: int = DEFAULT_LANES,
) -> Executor:
    """`local` with one worker and one lane runs in the driver process; otherwise workers
    are processes with `lanes` pairs in flight each."""
    extra = {} if grace is None else {"grace": grace}
    if kind == "local":
        if workers == 1 and lanes == 1:
            return InlineExecutor(max_stacks=max_stacks, trial_timeout=trial_timeout)
        return ProcessExecutor(
            workers, max_stacks=max_stacks, trial_timeout=trial_timeout, lanes=lanes, **extra
        )
    if kind == "ray":
        if lanes != 1:
            raise UndoBenchError(
                "lanes are the local executor's: on Ray, ask for more workers instead"
            )
        return RayExecutor(
            workers,
            address=ray_address,
            max_stacks=max_stacks,
            trial_timeout=trial_timeout,
            **extra,
        )
    raise ValueError(f"unknown executor {kind!r}; choose from {', '.join(EXECUTORS)}")
