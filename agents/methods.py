"""Recovery method names (the CLI's --method) to wrapper stacks."""

from __future__ import annotations

import gymnasium as gym

from undobench_gym.errors import UndoBenchError

from .wrappers import IdempotencyKeys, NaiveRetry

METHODS = ("bare", "B0", "B2", "B2-K")
PLANNED = ("B1", "B3", "B5", "B5-P", "B6")


def server_idempotency_for(method: str) -> str:
    """B2-K is an env option: server-side keys on every mutating endpoint."""
    return "all" if method == "B2-K" else "native"


def wrap(env: gym.Env[str, str], method: str) -> gym.Env[str, str]:
    if method == "bare":
        return env
    if method == "B0":
        return NaiveRetry(env)
    if method in ("B2", "B2-K"):
        return IdempotencyKeys(NaiveRetry(env))
    if method in PLANNED:
        raise UndoBenchError(
            f"method {method} is not available yet; available: {', '.join(METHODS)}"
        )
    raise UndoBenchError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
