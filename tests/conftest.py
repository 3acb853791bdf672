"""Shared fixtures: one real stack per domain for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from undobench_gym.agents.methods import wrap
from undobench_gym.agents.scripted import ScriptedAgent

import undobench_gym  # noqa: F401 - registers the env ids
from undobench_gym.env import UndoBenchEnv
from undobench_gym.pairing import run_episode

_ENVS: dict[tuple[str, str], UndoBenchEnv] = {}


@pytest.fixture(scope="session")
def stacks() -> Iterator[dict[tuple[str, str], UndoBenchEnv]]:
    yield _ENVS
    for env in _ENVS.values():
        env.close()
    _ENVS.clear()


@pytest.fixture()
def env_for(stacks: dict[tuple[str, str], UndoBenchEnv]) -> Any:
    def get(domain: str, server_idempotency: str = "native") -> UndoBenchEnv:
        key = (domain, server_idempotency)
        if key not in stacks:
            stacks[key] = UndoBenchEnv(domain, server_idempotency=server_idempotency)
        return stacks[key]

    return get


@pytest.fixture()
def play(env_for: Any) -> Any:
    """Run the scripted gold-plan agent for one episode; returns the episode record."""

    def run(workflow: Any, fault: str | None, method: str = "bare", seed: int = 1) -> Any:
        idem = "all" if method == "B2-K" else "native"
        env = wrap(env_for(workflow.domain, idem), method)
        return run_episode(env, ScriptedAgent(), seed=seed, workflow=workflow.id, fault=fault)

    return run
