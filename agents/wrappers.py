"""Recovery methods as Gymnasium wrappers; each changes one thing and overrides one method."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

from undobench_gym.seeding import stable_id

from .public_tools import KEY_ARG
from .recovery_common import RecoveryWrapper, StepResult, is_over, is_transient, load_obs


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


class IdempotencyKeys(RecoveryWrapper):
    """B2: give every call to a key-accepting tool (its public schema has an
    `idempotency_key` property) a key derived from the episode and the call's content, so a
    re-sent call carries the same key."""

    method = "B2"

    def handle(self, action: Any) -> StepResult:
        parsed = action
        if isinstance(action, str):
            try:
                parsed = json.loads(action)
            except ValueError:
                return self.send(action)
        if (
            isinstance(parsed, dict)
            and parsed.get("tool") in self.keyed
            and isinstance(parsed.get("arguments"), dict)
            and KEY_ARG not in parsed["arguments"]
        ):
            args = parsed["arguments"]
            key = stable_id(
                "idem",
                self.task_instance,
                parsed["tool"],
                json.dumps(args, sort_keys=True, default=str),
                length=24,
            )
            parsed = {**parsed, "arguments": {**args, KEY_ARG: key}}
        return self.send(parsed)
