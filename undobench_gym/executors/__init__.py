"""Where the pairs of a sweep run: in the driver, in local worker processes, or on Ray."""

from __future__ import annotations

from .base import INFRA_KINDS, Executor, Outcome, RetryPolicy, StackKey, TrialTask
from .local import InlineExecutor, ProcessExecutor
from .ray_actors import RayExecutor

__all__ = ["INFRA_KINDS", "Executor", "Outcome", "RetryPolicy", "StackKey", "TrialTask"]
__all__ += ["InlineExecutor", "ProcessExecutor", "RayExecutor", "make_executor"]

EXECUTORS = ("local", "ray")
DEFAULT_MAX_STACKS = 4


def make_executor(
    kind: str,
    workers: int,
    *,
    trial_timeout: float | None,
    max_stacks: int = DEFAULT_MAX_STACKS,
    ray_address: str | None = None,
    grace: float | None = None,
) -> Executor:
    """`local` with one worker runs in the driver process; more workers are processes."""
    extra = {} if grace is None else {"grace": grace}
    if kind == "local":
        if workers == 1:
            return InlineExecutor(max_stacks=max_stacks, trial_timeout=trial_timeout)
        return ProcessExecutor(workers, max_stacks=max_stacks, trial_timeout=trial_timeout, **extra)
    if kind == "ray":
        return RayExecutor(
            workers,
            address=ray_address,
            max_stacks=max_stacks,
            trial_timeout=trial_timeout,
            **extra,
        )
    raise ValueError(f"unknown executor {kind!r}; choose from {', '.join(EXECUTORS)}")
