"""Shared fixtures: one real stack per (domain, runtime, server-idempotency) per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import undobench_gym  # noqa: F401 - registers the env ids
from undobench_gym.agents.methods import wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode

_ENVS: dict[tuple[str, str, str], UndoBenchEnv] = {}


def docker_required() -> bool:
    """In CI the docker tests must run: a missing engine fails them instead of skipping."""
    return bool(os.environ.get("CI")) or os.environ.get("UNDOBENCH_REQUIRE_DOCKER") == "1"


def docker_problem() -> str | None:
    try:
        from undobench_gym.contract.errors import UndoBenchError
        from undobench_gym.core.runtime.images import current_image, docker_client

        current_image(docker_client())
    except (ImportError, UndoBenchError) as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def docker_ready() -> None:
    problem = docker_problem()
    if problem is None:
        return
    if docker_required():
        pytest.fail(f"docker is required here (CI) but not usable: {problem}")
    pytest.skip(f"docker runtime not available: {problem}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("docker") and "docker_ready" not in getattr(
            item, "fixturenames", []
        ):
            item.fixturenames.insert(0, "docker_ready")  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def stacks() -> Iterator[dict[tuple[str, str, str], UndoBenchEnv]]:
    yield _ENVS
    for env in _ENVS.values():
        env.close()
    _ENVS.clear()


@pytest.fixture()
def env_for(stacks: dict[tuple[str, str, str], UndoBenchEnv]) -> Any:
    def get(
        domain: str, server_idempotency: str = "native", runtime: str = "process"
    ) -> UndoBenchEnv:
        key = (domain, runtime, server_idempotency)
        if key not in stacks:
            stacks[key] = UndoBenchEnv(
                domain, server_idempotency=server_idempotency, runtime=runtime
            )
        return stacks[key]

    return get


@pytest.fixture()
def play(env_for: Any) -> Any:
    """Run the scripted gold-plan agent for one episode; returns the episode record."""

    def run(
        workflow: Any,
        fault: str | None,
        method: str = "bare",
        seed: int = 1,
        runtime: str = "process",
    ) -> Any:
        idem = "all" if method == "B2-K" else "native"
        env = wrap(env_for(workflow.domain, idem, runtime), method)
        return run_episode(env, ScriptedAgent(), seed=seed, workflow=workflow.id, fault=fault)

    return run
