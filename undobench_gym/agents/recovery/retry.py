"""B0 naive retry: the simplest recovery, and the one the others are measured against."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from undobench_gym.agents.recovery.base import (
    RecoveryWrapper,
    StepResult,
    is_over,
    is_transient,
    load_obs,
)


class NaiveRetry(RecoveryWrapper):
    """B0: re-send the same call after a transport error or a 5xx, up to `retries` times."""

    method = "B0"

    def __init__(self, env: gym.Env[str, str], retries: int = 2) -> None:
        super().__init__(env)
        self.retries = retries

    def handle(self, action: Any) -> StepResult:
        result = self.send(action)
        tries = 0
        while is_transient(load_obs(result[0])) and tries < self.retries and not is_over(result):
            tries += 1
            result = self.send(action)
        return result
