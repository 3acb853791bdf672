"""Recovery methods as Gymnasium wrappers; each changes one thing and overrides one method."""

from __future__ import annotations

import json
from typing import Any, SupportsFloat

import gymnasium as gym

from undobench_gym.seeding import stable_id

from .recovery_common import is_transient, load_obs


def _transient(obs_text: str) -> bool:
    return is_transient(load_obs(obs_text))


class NaiveRetry(gym.Wrapper[str, str, str, str]):
    """B0: re-send the same call after a transport error or a 5xx, up to `retries` times."""

    def __init__(self, env: gym.Env[str, str], retries: int = 2) -> None:
        super().__init__(env)
        self.retries = retries

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        tries = 0
        while _transient(obs) and tries < self.retries and not (terminated or truncated):
            tries += 1
            obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, info


class IdempotencyKeys(gym.Wrapper[str, str, str, str]):
    """B2: give every call to a key-accepting tool a key derived from the episode and the
    call's content, so a re-sent call carries the same key."""

    def __init__(self, env: gym.Env[str, str]) -> None:
        super().__init__(env)
        self.keyed: set[str] = set()
        self.task_instance = ""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.task_instance = info["task_instance"]
        self.keyed = {
            t["function"]["name"]
            for t in info["tools"]
            if "idempotency_key" in t["function"]["parameters"].get("properties", {})
        }
        return obs, info

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        parsed = action
        if isinstance(action, str):
            try:
                parsed = json.loads(action)
            except ValueError:
                return self.env.step(action)
        if (
            isinstance(parsed, dict)
            and parsed.get("tool") in self.keyed
            and isinstance(parsed.get("arguments"), dict)
            and "idempotency_key" not in parsed["arguments"]
        ):
            args = parsed["arguments"]
            key = stable_id(
                "idem",
                self.task_instance,
                parsed["tool"],
                json.dumps(args, sort_keys=True, default=str),
                length=24,
            )
            parsed = {**parsed, "arguments": {**args, "idempotency_key": key}}
        return self.env.step(parsed)
